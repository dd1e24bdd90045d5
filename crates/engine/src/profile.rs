//! Per-transaction statistics for `glass profile`: the TPC-E paper's Table 4 (records accessed,
//! row-level and higher-level locks, heap and index pages — total and unique) plus log bytes,
//! latch acquisitions, lock waits and time in the lock manager split into Lock, physical
//! contention and logical contention (its Figure 2).
//!
//! Shared writes (`storage::shared`) are counted from the transaction's begin to its end, so
//! a durable commit's force and everything before it are in; the end of the transaction
//! itself (its locks' release) is not.
//!
//! Collection is off by default and costs one relaxed load and a branch per record access
//! when off. It is switched on for a whole process with [`collect`]; each thread then keeps the
//! profile of the transaction it ran last ([`last`]). Page counts come from the storage
//! manager's per-thread counters: pages fixed while reading or writing a record count as heap
//! pages, every other fix (index descents and scans) as index pages. Log bytes are the bytes
//! of the records the transaction appended ([`wal::LogStats::record_bytes`]: exact when one
//! thread runs, as `glass profile` does); the padding that closed a thread's run of reserved
//! log bytes during the transaction is counted apart (`log_padding`).

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::Serialize;
use storage::counters::{self, StorageCounters};

/// How many [`Collecting`] guards are alive: collection is on while any is.
static ENABLED: AtomicUsize = AtomicUsize::new(0);

/// What one transaction did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct TxnProfile {
    pub records: u64,
    /// Record locks taken, those let go before the end (read committed) included.
    pub row_locks: u64,
    pub higher_locks: u64,
    pub heap_pages: u64,
    pub index_pages: u64,
    pub unique_pages: u64,
    pub log_bytes: u64,
    /// Log bytes of padding written during the transaction, closing a thread's run.
    pub log_padding: u64,
    pub latches: u64,
    pub lock_waits: u64,
    pub lock_ns: u64,
    pub lock_physical_ns: u64,
    pub lock_logical_ns: u64,
    /// Latch acquisitions and read-modify-writes on memory every thread writes, by place
    /// (indexed by `storage::shared::Place as usize`; see [`storage::shared`]).
    pub shared: [u64; storage::shared::PLACES],
}

impl std::ops::AddAssign for TxnProfile {
    fn add_assign(&mut self, o: TxnProfile) {
        self.records += o.records;
        self.row_locks += o.row_locks;
        self.higher_locks += o.higher_locks;
        self.heap_pages += o.heap_pages;
        self.index_pages += o.index_pages;
        self.unique_pages += o.unique_pages;
        self.log_bytes += o.log_bytes;
        self.log_padding += o.log_padding;
        self.latches += o.latches;
        self.lock_waits += o.lock_waits;
        self.lock_ns += o.lock_ns;
        self.lock_physical_ns += o.lock_physical_ns;
        self.lock_logical_ns += o.lock_logical_ns;
        for (mine, theirs) in self.shared.iter_mut().zip(o.shared) {
            *mine += theirs;
        }
    }
}

#[derive(Clone, Copy, Default)]
struct Running {
    start: StorageCounters,
    shared_start: storage::shared::SharedWrites,
    log_start: LogBytes,
    records: u64,
    heap_fixes: u64,
    /// The transaction's locks, counted as its commit released them early
    /// ([`before_early_release`]): at its end it holds none.
    released: Option<LockCounts>,
}

/// What a transaction's locks were, for its profile.
#[derive(Clone, Copy, Default)]
struct LockCounts {
    row: u64,
    higher: u64,
    waits: u64,
    lock_ns: u64,
    physical_ns: u64,
    logical_ns: u64,
}

impl LockCounts {
    fn of(l: &txn::TxnLocks) -> LockCounts {
        let mut c = LockCounts::default();
        for (name, _) in l.held() {
            if name.is_leaf() {
                c.row += 1;
            } else {
                c.higher += 1;
            }
        }
        // Taken, not only held at the end: a read-committed read's locks are gone by then.
        c.row += l.released_early();
        let s = l.stats();
        c.waits = s.waits;
        c.lock_ns = s.lock_ns;
        c.physical_ns = s.physical_contention_ns;
        c.logical_ns = s.logical_contention_ns;
        c
    }
}

thread_local! {
    static RUNNING: Cell<Running> = Cell::new(Running::default());
    static LAST: Cell<TxnProfile> = Cell::new(TxnProfile::default());
}

/// Collection switched on for the whole process while this lives. Guards nest: two profiles
/// running side by side (two tests in one process) each keep collection on until both are
/// done, so one finishing never silences the other.
#[must_use = "collection stops when the guard is dropped"]
pub struct Collecting(());

/// Switches collection on for the whole process until the guard is dropped, and unique-page
/// tracking on for this thread.
pub fn collect() -> Collecting {
    ENABLED.fetch_add(1, Ordering::Relaxed);
    counters::set_unique_tracking(true);
    Collecting(())
}

impl Drop for Collecting {
    fn drop(&mut self) {
        ENABLED.fetch_sub(1, Ordering::Relaxed);
        counters::set_unique_tracking(false);
    }
}

#[inline]
pub(crate) fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed) > 0
}

/// The profile of the transaction this thread finished last.
pub fn last() -> TxnProfile {
    LAST.with(|l| l.get())
}

/// Runs a record access, counting it and the pages it fixed as heap pages.
#[inline]
pub(crate) fn record_access<R>(f: impl FnOnce() -> R) -> R {
    if !enabled() {
        return f();
    }
    let before = counters::snapshot().fixes;
    let r = f();
    let fixed = counters::snapshot().fixes - before;
    RUNNING.with(|c| {
        let mut run = c.get();
        run.records += 1;
        run.heap_fixes += fixed;
        c.set(run);
    });
    r
}

/// The log's record and padding bytes so far (zero without a log).
#[derive(Clone, Copy, Default)]
pub(crate) struct LogBytes {
    records: u64,
    padding: u64,
}

pub(crate) fn log_bytes(log: Option<&wal::LogManager>) -> LogBytes {
    log.map_or_else(LogBytes::default, |l| {
        let s = l.stats();
        LogBytes {
            records: s.record_bytes(),
            padding: s.padding_bytes,
        }
    })
}

pub(crate) fn begin(log_bytes: LogBytes) {
    counters::set_unique_tracking(true);
    counters::begin_scope();
    RUNNING.with(|c| {
        c.set(Running {
            start: counters::snapshot(),
            shared_start: storage::shared::snapshot(),
            log_start: log_bytes,
            ..Running::default()
        })
    });
}

/// Counts the transaction's locks before its commit releases them early (the log's force
/// still to come), so that its profile, taken at its end, has them.
pub(crate) fn before_early_release(locks: Option<&txn::TxnLocks>) {
    if let Some(l) = locks {
        RUNNING.with(|c| {
            let mut run = c.get();
            run.released = Some(LockCounts::of(l));
            c.set(run);
        });
    }
}

pub(crate) fn end(locks: Option<&txn::TxnLocks>, log_bytes: LogBytes) {
    let run = RUNNING.with(|c| c.get());
    let moved = counters::snapshot() - run.start;
    let mut p = TxnProfile {
        records: run.records,
        heap_pages: run.heap_fixes,
        index_pages: moved.fixes.saturating_sub(run.heap_fixes),
        unique_pages: moved.unique_fixes,
        log_bytes: log_bytes.records.saturating_sub(run.log_start.records),
        log_padding: log_bytes.padding.saturating_sub(run.log_start.padding),
        latches: moved.latches,
        shared: storage::shared::snapshot().since(&run.shared_start).0,
        ..TxnProfile::default()
    };
    if let Some(c) = run.released.or_else(|| locks.map(LockCounts::of)) {
        p.row_locks = c.row;
        p.higher_locks = c.higher;
        p.lock_waits = c.waits;
        p.lock_ns = c.lock_ns;
        p.lock_physical_ns = c.physical_ns;
        p.lock_logical_ns = c.logical_ns;
    }
    LAST.with(|c| c.set(p));
}
