//! The log buffer: the tail of the log that is not yet written to storage.
//!
//! ```text
//!   log:  [ header | written to storage ......... | pending (being written) | buffer: used .. ]
//!         0        16                              written                   base     base+used
//! ```
//!
//! An appender *reserves* its frames' bytes under the log buffer latch — it moves `used` on
//! and gets `base + used` as the first frame's LSN — and copies the frames in after releasing
//! it ([`LogBuffer::reserve`], [`CopyCounts`]): the latch every appending thread shares is held
//! for a few additions, not for a copy into lines the previous holder's copy left on another
//! core. A writer *takes* the buffered bytes by swapping the [`Region`] with an empty one of
//! the same capacity (O(1) under the latch, no copy, no allocation), waits until the copies
//! into what it took are done, and writes them with the latch released, so appends continue
//! while the write and the sync run.
//!
//! Invariants: a region's bytes are always initialised (allocated zeroed, never shrunk), so
//! a copy writes into initialised memory and nothing uninitialised is ever read; `used` only
//! grows between takes, and each reservation is whole frames, so every write to storage ends
//! on a record boundary once the copies into it are done; `base` only grows, by exactly the
//! bytes taken.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use crossbeam::utils::CachePadded;
use storage::Lsn;

use crate::record::{check_frame, FrameCheck};

/// How far ahead of its end the log buffer is fetched for writing (see
/// [`LogBuffer::prefetch_ahead`]): a few transactions' worth of log records.
const WRITE_AHEAD: usize = 4096;

/// Shards of [`CopyCounts`]: threads past this many share a counter (which stays correct).
const COPY_SHARDS: usize = 64;

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

/// Copies under way into the buffer, outside its latch: per thread shard (on lines of their
/// own, so a thread counts its copies without meeting another) and per generation of the
/// buffer (a take starts the next), so a writer waits for the copies into the bytes it took
/// and not for those into the buffer that replaced them. A thread has at most one copy under
/// way; the counters are raised under the latch and lowered (release) when the copy is done.
pub(crate) struct CopyCounts {
    shards: Box<[CachePadded<[AtomicU32; 2]>]>,
    /// One past the highest shard that ever counted a copy: a wait looks no further, so that
    /// a writer on a one-thread run reads one line, not 64. Only grows; raised in
    /// [`CopyCounts::mine`], under the buffer latch, and read by waiters that took the latch
    /// after (or hold it), so they see every shard with a copy under way.
    used: AtomicUsize,
}

impl CopyCounts {
    pub fn new() -> CopyCounts {
        CopyCounts {
            shards: (0..COPY_SHARDS)
                .map(|_| CachePadded::new([AtomicU32::new(0), AtomicU32::new(0)]))
                .collect(),
            used: AtomicUsize::new(0),
        }
    }

    /// The counter of this thread's copies into generation `generation`. Called with the
    /// buffer latch held.
    #[inline]
    pub fn mine(&self, generation: u64) -> &AtomicU32 {
        let shard = storage::shard::thread_index() % COPY_SHARDS;
        if shard >= self.used.load(Ordering::Relaxed) {
            self.used.store(shard + 1, Ordering::Relaxed);
        }
        &self.shards[shard][(generation & 1) as usize]
    }

    /// Returns once every copy into generation `generation` that was reserved before the call
    /// is done. Each shard is waited for until it is seen at zero once: its copies reserved
    /// earlier are then done, whatever it reserves later. A copy is a `memcpy` of a few
    /// hundred bytes, so the wait spins, yielding now and then for a copier that was
    /// descheduled. The caller holds the buffer latch or took it after the reservations.
    pub fn wait_done(&self, generation: u64) {
        let parity = (generation & 1) as usize;
        let used = self.used.load(Ordering::Relaxed);
        for shard in &self.shards[..used] {
            let mut spins = 0u32;
            while shard[parity].load(Ordering::Acquire) != 0 {
                spins += 1;
                if spins.is_multiple_of(64) {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
        }
    }
}

/// The latch-protected state of the log buffer.
pub(crate) struct LogBuffer {
    /// LSN of the region's first byte: everything below it has been taken by a writer.
    pub base: u64,
    /// Whole frames reserved since the last take (copied, or being copied: see [`CopyCounts`]).
    pub bytes: Region,
    /// Takes so far: which of [`CopyCounts`]' two counters an appender raises.
    pub generation: u64,
    /// Records appended since the log was opened.
    pub records: u64,
    /// Bytes appended since the log was opened.
    pub bytes_appended: u64,
    /// Commit records appended since the log was opened.
    pub commits: u64,
    /// Commit records in `bytes` (moved to the writer on a take, for group-commit statistics).
    pub commits_buffered: u64,
}

/// Bytes taken from the buffer by a writer.
pub(crate) struct Taken {
    pub base: u64,
    pub commits: u64,
    /// The generation the bytes were reserved in: wait for its copies before writing.
    pub generation: u64,
}

/// Bytes reserved by [`LogBuffer::reserve`]: copy `len` bytes to `to`, then lower the copy
/// counter that was raised for them.
pub(crate) struct Reserved {
    pub lsn: Lsn,
    pub to: *mut u8,
}

impl LogBuffer {
    pub fn new(base: u64, capacity: usize) -> LogBuffer {
        LogBuffer {
            base,
            bytes: Region::with_capacity(capacity),
            generation: 0,
            records: 0,
            bytes_appended: 0,
            commits: 0,
            commits_buffered: 0,
        }
    }

    /// The LSN the next record will get.
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
    /// with no copy under way into the region (the caller waited: the bytes move).
    #[cold]
    pub fn grow(&mut self, len: usize) {
        let capacity = (2 * self.bytes.bytes.len()).max(self.bytes.used + len);
        let mut bytes = vec![0; capacity];
        bytes[..self.bytes.used].copy_from_slice(self.bytes.as_slice());
        self.bytes.bytes = bytes;
    }

    /// Reserves `len` bytes (room for them made first: [`LogBuffer::has_room`]) for `frames`
    /// whole frames; returns the first one's LSN and where to copy them. The counters count
    /// them at once.
    #[inline]
    pub fn reserve(&mut self, len: usize, frames: u64) -> Reserved {
        debug_assert!(self.has_room(len));
        let at = self.bytes.used;
        self.bytes.used += len;
        self.records += frames;
        self.bytes_appended += len as u64;
        Reserved {
            lsn: Lsn(self.base + at as u64),
            // In bounds: `has_room`. Derived from the vector's pointer without a reference to
            // its bytes, so copies into distinct reservations do not alias any reference.
            to: self.bytes.bytes.as_mut_ptr().wrapping_add(at),
        }
    }

    /// After an append of `len` bytes, starts fetching for writing the lines as far beyond
    /// the new end as [`WRITE_AHEAD`], as many as were just appended. Each line of the buffer
    /// is so fetched once, some appends before it is written: the buffer (a megabyte or two,
    /// filled once between takes) is cold, and without this the stores of an append wait for
    /// their lines. Only memory the region owns is touched.
    #[inline]
    pub fn prefetch_ahead(&self, len: usize) {
        let to = (self.bytes.used + WRITE_AHEAD).min(self.bytes.bytes.len());
        let from = (self.bytes.used + WRITE_AHEAD).saturating_sub(len);
        if from < to {
            storage::prefetch::range_for_write(
                self.bytes.bytes.as_ptr().wrapping_add(from),
                to - from,
            );
        }
    }

    /// Swaps the buffered bytes into `into` (which must be empty and no smaller) and advances
    /// `base` past them; the next generation begins.
    pub fn take(&mut self, into: &mut Region) -> Taken {
        debug_assert!(into.is_empty());
        std::mem::swap(into, &mut self.bytes);
        let taken = Taken {
            base: self.base,
            commits: std::mem::take(&mut self.commits_buffered),
            generation: self.generation,
        };
        self.generation += 1;
        self.base += into.len() as u64;
        taken
    }

    /// The buffered bytes from `lsn` on, if `lsn` lies in the buffer. Only with no copy under
    /// way into the region (the caller waited, holding the latch).
    pub fn bytes_from(&self, lsn: u64) -> Option<&[u8]> {
        if lsn < self.base || lsn >= self.end() {
            return None;
        }
        Some(&self.bytes.as_slice()[(lsn - self.base) as usize..])
    }

    /// Checks that the buffer holds whole, intact frames. Only with no copy under way.
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
        assert!(self.commits_buffered <= self.commits);
        assert!(self.bytes_appended >= bytes.len() as u64);
    }
}
