//! [`LockManager`]: hierarchical strict two-phase locking over the lock table.
//!
//! A transaction's locks are described by two things:
//!
//! * the shared lock table (granted groups and wait queues, one latch per bucket), and
//! * its own [`TxnLocks`], which only it touches: every lock it holds with its mode, the
//!   mode it holds on the database and on each table it used, and per table the count of
//!   leaf (record or page) locks and whether the table was escalated.
//!
//! The per-transaction cache is what makes the hierarchy cheap: the second record of a
//! table finds the table's `IX` in `TxnLocks` and sends one request to the lock table, not
//! three.
//!
//! ```text
//!   lock_record(t, table 1, key 42, X)
//!     database covers X below?  ── yes ──▶ done (no request)
//!     table 1 covers X below?   ── yes ──▶ done
//!     table 1 held ⊇ IX?        ── no ───▶ database ⊇ IX? else request(Database, IX)
//!                                          request(Table 1, IX)
//!     leaf count == threshold?  ── yes ──▶ escalate: request(Table 1, X), release leaves
//!     request(Record{1, 42}, X)
//! ```
//!
//! A request (`request`) latches the name's bucket and either grants at once — the name is
//! held in a covering mode; or an upgrade is compatible with the other holders (it converts
//! in place); or a new request is compatible and nobody waits (no barging) — or queues
//! and sleeps on the transaction's wait slot with the bucket latch released. See
//! [`super::deadlock`] for when waiting ends in a deadlock error.
//!
//! The common path is one function: the immediate grants of `request` (a covering
//! re-request; a compatible new request on a head nobody waits for) and the release of a
//! head without waiters are inlined into the entry points, and everything else — upgrades,
//! queueing, waking waiters, timed latching, escalation, a table's first intention lock —
//! lives in cold functions. Each held lock keeps its bucket index next to it in
//! `TxnLocks` (`held_buckets[i]` for `held[i]`), so `release_all` latches the bucket
//! without hashing the name again.
//!
//! Conditional requests ([`LockManager::try_lock_record`]) run the same grant test and
//! return `false` where `request` would queue, leaving the name's head as it was: the engine
//! calls them while it holds a B+-tree leaf latch, where waiting could deadlock against
//! latches, and waits unconditionally only after releasing the latch.
//!
//! Escalation: when a transaction holding `escalation_threshold` leaf locks in a table asks
//! for another, it asks instead for the table in `S` (all its leaf locks there are reads)
//! or `X`, and on success releases those leaf locks. Later leaf requests on the table are
//! covered by it (an `S`-escalated table is converted to `X` for a write).
//!
//! Allocation. Once warm, the lock path allocates nothing: lock heads are recycled per
//! bucket (see `table`), and a finished [`TxnLocks`] leaves its vectors and wait slot in a
//! one-entry per-thread stash that the thread's next [`LockManager::begin`] takes back, so
//! an engine that begins a fresh `TxnLocks` per transaction does not pay for them again.
//! `tests/lock_alloc.rs` counts allocations to hold this.
//!
//! Coarse-lock partitions ([`LockConfig::coarse_partitions`], one per worker thread in the
//! engine). Every transaction takes `IX` or `IS` on the database and on each table it
//! touches; with one lock head per table, every transaction of every thread latched the same
//! few buckets and pushed onto the same grant lists (on 16 threads the paper mix spent most
//! of its time there). Partitioned, the database and each table have `P` lock names
//! (`LockName::DatabasePart`, `LockName::TablePart`): an intention mode goes to the
//! requesting thread's partition only, every other mode (`S`, `SIX`, `X`: a table scan, an
//! escalation) to each partition in ascending order. Intention modes are compatible with
//! each other, so nothing is lost; `S`/`X` still conflict with every intention lock, on
//! whichever partition it is. Callers keep naming `Database` and `Table`: the partitions live
//! in the lock table only, and [`TxnLocks::mode_of`] answers for the whole table.
//!
//! Statistics are counted in `TxnLocks` (no shared cache line on the lock path) and added
//! to the manager's atomic totals by `release_all`, one set per thread shard. With `timing` on, every entry point
//! reads the clock: `Lock` is its time minus the two waits, `Lock-PC` the time spent
//! acquiring a contended bucket latch (a `try` first, so only the contended path is timed),
//! `Lock-LC` the time blocked behind conflicting holders (the TPC-E paper's Figure 2).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam::utils::CachePadded;
use parking_lot::Mutex;
use storage::latch::{SpinGuard, SpinLatch};
use storage::shared::{self, Place};

use super::deadlock::WaitForGraph;
use super::mode::LockMode;
use super::name::LockName;
use super::table::{Bucket, Grant, LockHead, LockTable, WaitSlot, Waiter};
use super::{LockError, TxnId};

/// How a [`LockManager`] behaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockConfig {
    /// Leaf (record or page) locks one transaction may hold in one table; the next request
    /// escalates to a table lock. `usize::MAX` disables escalation.
    pub escalation_threshold: usize,
    /// Berkeley-DB style: the engine locks pages instead of records (see `cc::two_pl`).
    pub page_level: bool,
    /// A wait longer than this fails with the retryable [`LockError::Timeout`]; a backstop,
    /// deadlocks are detected without it.
    pub wait_timeout: Duration,
    /// Whether the lock table's bucket latches are enabled (off: one thread only).
    pub latching: bool,
    /// Measure `Lock` / `Lock-PC` / `Lock-LC` time; off, no clock is read on the grant path.
    pub timing: bool,
    /// Lock-table buckets (rounded up to a power of two). The default, 256, keeps the
    /// bucket array (10 KB) and the lock heads in use in cache: a transaction holds a few
    /// dozen locks, and a table of 4,096 buckets made each record lock miss the cache twice,
    /// on its bucket and on its head (the full engine ran 6–25% slower on one thread).
    pub buckets: usize,
    /// How often a blocked transaction searches the wait-for graph again (a backstop to
    /// the search made when it blocks).
    pub deadlock_check_interval: Duration,
    /// How long a blocked transaction spins, watching for its grant, before it sleeps
    /// (zero: it sleeps at once). Most waits in an OLTP mix last part of one short
    /// transaction, tens of µs; sleeping and being woken costs two system calls and the time
    /// an idle core takes to wake, which can exceed the wait. Spinning pays only while every
    /// thread has a core of its own: with more threads than cores the spinner may keep the
    /// holder off its core. The default is zero; `engine` spins when its worker threads fit
    /// the machine's cores (on 2 cores, 2 threads on one TPC-C warehouse ran the paper mix
    /// about 1.7× as fast as with sleeping at once; 4 threads ran about 20% slower).
    pub spin_wait: Duration,
    /// Partitions of the database's and each table's lock (1: not partitioned). Every
    /// transaction takes `IX` or `IS` on the database and on each table it touches, so with
    /// one lock per table every transaction of every thread latches the same few lock
    /// heads and appends to the same grant lists. Partitioned, an intention mode is asked of
    /// the requesting thread's partition only and any other mode of every partition, so
    /// threads on distinct partitions share nothing for their intention locks while `S`, `SIX`
    /// and `X` on a table still conflict with every intention below it.
    pub coarse_partitions: usize,
}

impl Default for LockConfig {
    fn default() -> Self {
        LockConfig {
            escalation_threshold: 5000,
            page_level: false,
            wait_timeout: Duration::from_secs(10),
            latching: true,
            timing: false,
            buckets: 256,
            deadlock_check_interval: Duration::from_millis(50),
            spin_wait: Duration::ZERO,
            coarse_partitions: 1,
        }
    }
}

/// Totals over all finished transactions (those that called `release_all`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LockStats {
    /// Requests that reached the lock table (the hierarchy's cached and covered requests
    /// are not counted).
    pub requests: u64,
    /// Requests granted without waiting (including re-requests of held modes).
    pub immediate: u64,
    /// Requests that queued.
    pub waits: u64,
    pub deadlocks: u64,
    pub timeouts: u64,
    pub escalations: u64,
    /// Requests for a name already held in a weaker mode.
    pub upgrades: u64,
    /// Conditional requests ([`LockManager::try_lock_record`]) refused because they would
    /// have waited (not part of `requests`).
    pub refused: u64,
    /// `Lock`: time in the lock manager's entry points, waits excluded.
    pub lock_ns: u64,
    /// `Lock-PC`: time acquiring contended bucket latches.
    pub physical_contention_ns: u64,
    /// `Lock-LC`: time blocked behind conflicting holders.
    pub logical_contention_ns: u64,
}

const STAT_FIELDS: usize = 11;

/// Shards of the statistics totals: more than the threads of the machines measured.
const TOTAL_SHARDS: usize = 64;

impl LockStats {
    fn to_array(self) -> [u64; STAT_FIELDS] {
        [
            self.requests,
            self.immediate,
            self.waits,
            self.deadlocks,
            self.timeouts,
            self.escalations,
            self.upgrades,
            self.lock_ns,
            self.physical_contention_ns,
            self.logical_contention_ns,
            self.refused,
        ]
    }

    fn from_array(a: [u64; STAT_FIELDS]) -> Self {
        LockStats {
            requests: a[0],
            immediate: a[1],
            waits: a[2],
            deadlocks: a[3],
            timeouts: a[4],
            escalations: a[5],
            upgrades: a[6],
            lock_ns: a[7],
            physical_contention_ns: a[8],
            logical_contention_ns: a[9],
            refused: a[10],
        }
    }
}

/// What one transaction holds on one table.
#[derive(Clone, Copy, Debug)]
struct TableLocks {
    table: u32,
    /// The mode held on the table, if any.
    mode: Option<LockMode>,
    /// Leaf locks held in the table.
    leaf_count: usize,
    escalated: bool,
}

/// A transaction's locks, owned by the transaction. Create with [`LockManager::begin`];
/// reuse (keeping the vectors' capacity) with [`TxnLocks::reset`] after `release_all`.
pub struct TxnLocks {
    txn: TxnId,
    /// The coarse-lock partition this transaction's intention locks go to.
    partition: u16,
    /// Every lock held, once per name, with its current mode.
    held: Vec<(LockName, LockMode)>,
    /// `held_buckets[i]`: the lock-table bucket of `held[i]`'s name (release does not hash).
    held_buckets: Vec<u32>,
    /// The mode held on the database.
    database: Option<LockMode>,
    /// Per table touched; few per transaction, so a vector searched linearly.
    tables: Vec<TableLocks>,
    slot: Arc<WaitSlot>,
    stats: LockStats,
}

impl TxnLocks {
    pub fn txn(&self) -> TxnId {
        self.txn
    }

    /// Every lock held, with its mode.
    pub fn held(&self) -> &[(LockName, LockMode)] {
        &self.held
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// The mode held on `name`, if any.
    pub fn mode_of(&self, name: LockName) -> Option<LockMode> {
        match name {
            LockName::Database => return self.database,
            LockName::Table(table) => return self.table(table).and_then(|t| t.mode),
            _ => {}
        }
        self.held
            .iter()
            .rev()
            .find(|(n, _)| *n == name)
            .map(|h| h.1)
    }

    /// Leaf locks held in `table`.
    pub fn leaf_locks_in(&self, table: u32) -> usize {
        self.table(table).map_or(0, |t| t.leaf_count)
    }

    /// Whether this transaction's leaf locks in `table` were escalated to a table lock.
    pub fn is_escalated(&self, table: u32) -> bool {
        self.table(table).is_some_and(|t| t.escalated)
    }

    /// Statistics of this transaction so far (added to the manager's at `release_all`).
    pub fn stats(&self) -> LockStats {
        self.stats
    }

    /// Starts transaction `txn` with this (released) state, keeping its allocations.
    pub fn reset(&mut self, txn: TxnId) {
        assert!(
            self.held.is_empty(),
            "reset of {} before release_all",
            self.txn
        );
        self.txn = txn;
        self.database = None;
        self.tables.clear();
        self.stats = LockStats::default();
    }

    fn table(&self, table: u32) -> Option<&TableLocks> {
        self.tables.iter().find(|t| t.table == table)
    }

    #[inline]
    fn table_index(&mut self, table: u32) -> usize {
        match self.tables.iter().position(|t| t.table == table) {
            Some(i) => i,
            None => {
                self.tables.push(TableLocks {
                    table,
                    mode: None,
                    leaf_count: 0,
                    escalated: false,
                });
                self.tables.len() - 1
            }
        }
    }

    /// Records a new lock on `name`, whose head lies in lock-table bucket `bucket`.
    #[inline]
    fn push_held(&mut self, name: LockName, mode: LockMode, bucket: u32) {
        self.held.push((name, mode));
        self.held_buckets.push(bucket);
    }

    fn note_upgrade(&mut self, name: LockName, mode: LockMode) {
        if let Some(h) = self.held.iter_mut().rev().find(|(n, _)| *n == name) {
            h.1 = mode;
        }
    }
}

/// The reusable parts of a finished [`TxnLocks`]: empty vectors with their capacity and an
/// idle wait slot.
struct TxnBuffers {
    held: Vec<(LockName, LockMode)>,
    held_buckets: Vec<u32>,
    tables: Vec<TableLocks>,
    slot: Arc<WaitSlot>,
}

thread_local! {
    /// The buffers of the last `TxnLocks` this thread dropped after `release_all`.
    static RECYCLED: Cell<Option<TxnBuffers>> = const { Cell::new(None) };
}

impl Drop for TxnLocks {
    fn drop(&mut self) {
        if !self.held.is_empty() {
            if !std::thread::panicking() {
                debug_assert!(
                    false,
                    "{} dropped holding {} locks without release_all",
                    self.txn,
                    self.held.len()
                );
            }
            return;
        }
        // Released: nobody else refers to the slot (waiters are gone), so it is idle.
        if Arc::strong_count(&self.slot) == 1 {
            let mut tables = std::mem::take(&mut self.tables);
            tables.clear();
            let buffers = TxnBuffers {
                held: std::mem::take(&mut self.held),
                held_buckets: std::mem::take(&mut self.held_buckets),
                tables,
                slot: self.slot.clone(),
            };
            // During thread teardown the stash may be gone; the buffers are then freed.
            let _ = RECYCLED.try_with(|r| r.set(Some(buffers)));
        }
    }
}

/// Clock readings of one entry-point call (only when timing is on).
struct Timer {
    start: Option<Instant>,
    physical_ns: u64,
    logical_ns: u64,
}

/// The lock manager. `Send + Sync`; one per database.
pub struct LockManager {
    config: LockConfig,
    table: LockTable,
    /// Who waits for whom. Taken after a bucket latch, never before one; only on the
    /// blocking path and when a head with waiters changes.
    graph: Mutex<WaitForGraph>,
    /// Totals of finished transactions, indexed like `LockStats::to_array`, one shard per
    /// thread (`thread_index % TOTAL_SHARDS`) on cache lines of its own: every transaction adds
    /// to them, so one set of totals was a line every thread wrote at every commit.
    totals: Box<[CachePadded<[AtomicU64; STAT_FIELDS]>]>,
}

impl LockManager {
    pub fn new(config: LockConfig) -> Self {
        LockManager {
            table: LockTable::new(config.buckets, config.latching),
            config,
            graph: Mutex::new(WaitForGraph::new()),
            totals: (0..TOTAL_SHARDS).map(|_| CachePadded::default()).collect(),
        }
    }

    pub fn config(&self) -> &LockConfig {
        &self.config
    }

    /// The lock state of a new transaction.
    pub fn begin(&self, txn: TxnId) -> TxnLocks {
        let (held, held_buckets, tables, slot) = match RECYCLED.try_with(Cell::take).ok().flatten()
        {
            Some(b) => (b.held, b.held_buckets, b.tables, b.slot),
            None => (
                Vec::new(),
                Vec::new(),
                Vec::new(),
                Arc::new(WaitSlot::new()),
            ),
        };
        // Threads take partition `thread_index % partitions`: up to that many threads each
        // get one of their own, and a thread always the same one.
        let parts = self.config.coarse_partitions.clamp(1, 1 << 15);
        let partition = (storage::shard::thread_index() % parts) as u16;
        TxnLocks {
            txn,
            partition,
            held,
            held_buckets,
            database: None,
            tables,
            slot,
            stats: LockStats::default(),
        }
    }

    /// Locks a record, first taking the intention locks above it (`IS`/`IX` on database
    /// and table) unless already held or covered; escalates when the table's leaf-lock
    /// count reaches the threshold.
    pub fn lock_record(
        &self,
        t: &mut TxnLocks,
        table: u32,
        key: u64,
        mode: LockMode,
    ) -> Result<(), LockError> {
        let mut timer = self.timer();
        let r = self.lock_leaf(t, table, LockName::Record { table, key }, mode, &mut timer);
        self.stop(t, timer);
        r
    }

    /// Conditional [`lock_record`](Self::lock_record) (ARIES/IM's request made while holding
    /// a page latch): grants `mode` on the record if that is possible right now and returns
    /// `Ok(true)`; otherwise returns `Ok(false)` at once, neither queued nor waiting, with the
    /// record lock's state unchanged. Intention locks on database and table are requested
    /// conditionally too; ones it got stay held when the record lock is refused (as after a
    /// failed `lock_record`). A request that would escalate is refused: the caller's
    /// unconditional `lock_record` escalates. A refused request is counted in
    /// [`LockStats::refused`] only (the statistics keep `requests = immediate + waits`).
    pub fn try_lock_record(
        &self,
        t: &mut TxnLocks,
        table: u32,
        key: u64,
        mode: LockMode,
    ) -> Result<bool, LockError> {
        let mut timer = self.timer();
        let r = self.try_lock_leaf(t, table, LockName::Record { table, key }, mode, &mut timer);
        t.stats.refused += u64::from(!r);
        self.stop(t, timer);
        Ok(r)
    }

    /// Locks a page (page-level locking), with the same hierarchy and escalation as records.
    pub fn lock_page(
        &self,
        t: &mut TxnLocks,
        table: u32,
        page: u64,
        mode: LockMode,
    ) -> Result<(), LockError> {
        let mut timer = self.timer();
        let r = self.lock_leaf(t, table, LockName::Page { table, page }, mode, &mut timer);
        self.stop(t, timer);
        r
    }

    /// Locks a table (e.g. `S` for a scan, `IX` before inserts), taking the database's
    /// intention lock first.
    pub fn lock_table(
        &self,
        t: &mut TxnLocks,
        table: u32,
        mode: LockMode,
    ) -> Result<(), LockError> {
        let mut timer = self.timer();
        let r = self.lock_table_inner(t, table, mode, &mut timer);
        self.stop(t, timer);
        r
    }

    /// Locks one name, without the hierarchy (no intention locks, no escalation).
    pub fn lock(&self, t: &mut TxnLocks, name: LockName, mode: LockMode) -> Result<(), LockError> {
        let mut timer = self.timer();
        let r = self
            .request_coarse(t, name, mode, &mut timer)
            .map(|got| match name {
                LockName::Database => t.database = Some(got),
                LockName::Table(table) => {
                    let i = t.table_index(table);
                    t.tables[i].mode = Some(got);
                }
                LockName::Page { .. }
                | LockName::Record { .. }
                | LockName::DatabasePart(_)
                | LockName::TablePart { .. } => {}
            });
        self.stop(t, timer);
        r
    }

    /// Strict 2PL's end: releases every lock of `t` (at commit or after abort), waking
    /// waiters that become grantable, and adds `t`'s statistics to the totals.
    pub fn release_all(&self, t: &mut TxnLocks) {
        let mut timer = self.timer();
        let txn = t.txn;
        debug_assert_eq!(t.held.len(), t.held_buckets.len());
        for (&(name, _), &bucket) in t.held.iter().zip(&t.held_buckets) {
            self.release(txn, name, bucket, &mut timer);
        }
        t.held.clear();
        t.held_buckets.clear();
        t.database = None;
        t.tables.clear();
        self.stop(t, timer);
        let shard = &self.totals[storage::shard::thread_index() % TOTAL_SHARDS];
        for (total, value) in shard.iter().zip(t.stats.to_array()) {
            if value != 0 {
                total.fetch_add(value, Ordering::Relaxed);
            }
        }
        t.stats = LockStats::default();
    }

    /// Totals over the transactions finished so far.
    pub fn stats(&self) -> LockStats {
        LockStats::from_array(std::array::from_fn(|i| {
            self.totals
                .iter()
                .map(|shard| shard[i].load(Ordering::Relaxed))
                .sum()
        }))
    }

    pub fn reset_stats(&self) {
        for total in self.totals.iter().flat_map(|shard| shard.iter()) {
            total.store(0, Ordering::Relaxed);
        }
    }

    /// Lock names with a head in the table (granted or waited for).
    pub fn lock_name_count(&self) -> usize {
        self.table.buckets().map(|b| b.lock().heads().len()).sum()
    }

    /// Panics unless every head satisfies the lock table's invariants and the wait-for
    /// graph has exactly the queued requests as nodes. Call when no request is in flight
    /// (latches are taken one bucket at a time, so a concurrent request may look torn).
    pub fn check_invariants(&self) {
        let mut waiting = Vec::new();
        for bucket in self.table.buckets() {
            let guard = bucket.lock();
            for head in guard.heads() {
                head.check_invariants();
                waiting.extend(head.queue.iter().map(|w| w.txn));
            }
        }
        let graph = self.graph();
        assert_eq!(
            graph.len(),
            waiting.len(),
            "wait-for graph has {} nodes, queues hold {} requests",
            graph.len(),
            waiting.len()
        );
        for txn in waiting {
            assert!(
                graph.is_waiting(txn),
                "{txn} queued but not in the wait-for graph"
            );
        }
    }

    /// Whether `txn` is blocked in the lock manager (tests use it to sequence threads).
    #[cfg(test)]
    pub(crate) fn is_waiting(&self, txn: TxnId) -> bool {
        self.graph().is_waiting(txn)
    }

    // ---- the hierarchy ----

    #[inline(always)]
    fn lock_leaf(
        &self,
        t: &mut TxnLocks,
        table: u32,
        name: LockName,
        mode: LockMode,
        timer: &mut Timer,
    ) -> Result<(), LockError> {
        if t.database.is_some_and(|d| d.covers_below(mode)) {
            return Ok(());
        }
        let i = t.table_index(table);
        if t.tables[i].mode.is_some_and(|m| m.covers_below(mode)) {
            return Ok(());
        }
        // The table's intention lock is normally held already: checked here, inline.
        let intention = mode.intention();
        if !t.tables[i].mode.is_some_and(|m| m.covers(intention)) {
            self.ensure_table(t, i, intention, timer)?;
        }
        if t.tables[i].escalated || t.tables[i].leaf_count >= self.config.escalation_threshold {
            return self.escalate(t, i, mode, timer);
        }
        let held_before = t.held.len();
        self.request(t, name, mode, timer)?;
        if t.held.len() > held_before {
            t.tables[i].leaf_count += 1;
        }
        Ok(())
    }

    /// [`Self::lock_leaf`] that never waits: false where it would have to.
    #[inline(always)]
    fn try_lock_leaf(
        &self,
        t: &mut TxnLocks,
        table: u32,
        name: LockName,
        mode: LockMode,
        timer: &mut Timer,
    ) -> bool {
        if t.database.is_some_and(|d| d.covers_below(mode)) {
            return true;
        }
        let intention = mode.intention();
        let i = match t.tables.iter().position(|x| x.table == table) {
            Some(i) if t.tables[i].mode.is_some_and(|m| m.covers_below(mode)) => return true,
            Some(i) if t.tables[i].mode.is_some_and(|m| m.covers(intention)) => i,
            _ => {
                // The intentions above it, conditionally: database, then table.
                let db_want = intention.intention();
                if !t.database.is_some_and(|m| m.covers(db_want)) {
                    let target = t.database.map_or(db_want, |m| m.supremum(db_want));
                    match self.try_request_coarse(t, LockName::Database, target, timer) {
                        Some(got) => t.database = Some(got),
                        None => return false,
                    }
                }
                let i = t.table_index(table);
                let target = t.tables[i]
                    .mode
                    .map_or(intention, |m| m.supremum(intention));
                match self.try_request_coarse(t, LockName::Table(table), target, timer) {
                    Some(got) => t.tables[i].mode = Some(got),
                    None => return false,
                }
                if t.tables[i].mode.is_some_and(|m| m.covers_below(mode)) {
                    return true;
                }
                i
            }
        };
        if t.tables[i].escalated || t.tables[i].leaf_count >= self.config.escalation_threshold {
            return false;
        }
        let held_before = t.held.len();
        if self.try_request(t, name, mode, timer).is_none() {
            return false;
        }
        if t.held.len() > held_before {
            t.tables[i].leaf_count += 1;
        }
        true
    }

    fn lock_table_inner(
        &self,
        t: &mut TxnLocks,
        table: u32,
        mode: LockMode,
        timer: &mut Timer,
    ) -> Result<(), LockError> {
        if t.database.is_some_and(|d| d.covers_below(mode)) {
            return Ok(());
        }
        let i = t.table_index(table);
        self.ensure_table(t, i, mode, timer)
    }

    /// Makes `t` hold at least `want` on table `tables[i]`, database intention first.
    #[inline(never)]
    fn ensure_table(
        &self,
        t: &mut TxnLocks,
        i: usize,
        want: LockMode,
        timer: &mut Timer,
    ) -> Result<(), LockError> {
        let held = t.tables[i].mode;
        if held.is_some_and(|m| m.covers(want)) {
            return Ok(());
        }
        let target = held.map_or(want, |m| m.supremum(want));
        self.ensure_database(t, target.intention(), timer)?;
        let got = self.request_coarse(t, LockName::Table(t.tables[i].table), target, timer)?;
        t.tables[i].mode = Some(got);
        Ok(())
    }

    fn ensure_database(
        &self,
        t: &mut TxnLocks,
        want: LockMode,
        timer: &mut Timer,
    ) -> Result<(), LockError> {
        let held = t.database;
        if held.is_some_and(|m| m.covers(want)) {
            return Ok(());
        }
        let target = held.map_or(want, |m| m.supremum(want));
        let got = self.request_coarse(t, LockName::Database, target, timer)?;
        t.database = Some(got);
        Ok(())
    }

    /// Replaces `t`'s leaf locks in table `tables[i]` by one table lock covering them and
    /// `mode`. On error nothing changes (the leaf locks stay).
    #[cold]
    #[inline(never)]
    fn escalate(
        &self,
        t: &mut TxnLocks,
        i: usize,
        mode: LockMode,
        timer: &mut Timer,
    ) -> Result<(), LockError> {
        let table = t.tables[i].table;
        let writes = mode.intention() == LockMode::IX
            || t.held.iter().any(|(n, m)| {
                n.is_leaf() && n.table() == Some(table) && m.intention() == LockMode::IX
            });
        let leaf_mode = if writes { LockMode::X } else { LockMode::S };
        self.ensure_table(t, i, leaf_mode, timer)?;
        if !t.tables[i].escalated {
            t.stats.escalations += 1;
            t.tables[i].escalated = true;
        }
        t.tables[i].leaf_count = 0;
        let txn = t.txn;
        let mut keep = 0;
        for k in 0..t.held.len() {
            let (n, m) = t.held[k];
            let bucket = t.held_buckets[k];
            if n.is_leaf() && n.table() == Some(table) {
                self.release(txn, n, bucket, timer);
            } else {
                t.held[keep] = (n, m);
                t.held_buckets[keep] = bucket;
                keep += 1;
            }
        }
        t.held.truncate(keep);
        t.held_buckets.truncate(keep);
        Ok(())
    }

    /// The wait-for graph, latched (one mutex for the whole lock table).
    #[inline]
    fn graph(&self) -> parking_lot::MutexGuard<'_, WaitForGraph> {
        shared::bump(Place::LockGraph);
        self.graph.lock()
    }

    // ---- coarse-lock partitions ----

    /// Requests `mode` on the database or a table (`name`), through its partitions when
    /// they are on: an intention mode on `t`'s partition, any other on each partition in
    /// ascending order (so two such requests never wait for each other in a cycle). Returns
    /// the mode then held. A request that fails part-way keeps the partitions it got, as a
    /// failed request keeps the intention locks above it.
    #[inline(always)]
    fn request_coarse(
        &self,
        t: &mut TxnLocks,
        name: LockName,
        mode: LockMode,
        timer: &mut Timer,
    ) -> Result<LockMode, LockError> {
        let parts = self.config.coarse_partitions;
        if parts <= 1 || !name.is_coarse() {
            return self.request(t, name, mode, timer);
        }
        if mode.intention() == mode {
            return self.request(t, name.partition(t.partition), mode, timer);
        }
        self.request_all_partitions(t, name, mode, timer)
    }

    #[cold]
    #[inline(never)]
    fn request_all_partitions(
        &self,
        t: &mut TxnLocks,
        name: LockName,
        mode: LockMode,
        timer: &mut Timer,
    ) -> Result<LockMode, LockError> {
        let mut got = mode;
        for part in 0..self.config.coarse_partitions.min(1 << 15) {
            got = got.supremum(self.request(t, name.partition(part as u16), mode, timer)?);
        }
        Ok(got)
    }

    /// [`Self::request_coarse`] that never waits: `None` where it would have to (keeping the
    /// partitions it got before).
    #[inline(always)]
    fn try_request_coarse(
        &self,
        t: &mut TxnLocks,
        name: LockName,
        mode: LockMode,
        timer: &mut Timer,
    ) -> Option<LockMode> {
        let parts = self.config.coarse_partitions;
        if parts <= 1 || !name.is_coarse() {
            return self.try_request(t, name, mode, timer);
        }
        if mode.intention() == mode {
            return self.try_request(t, name.partition(t.partition), mode, timer);
        }
        let mut got = mode;
        for part in 0..parts.min(1 << 15) {
            got = got.supremum(self.try_request(t, name.partition(part as u16), mode, timer)?);
        }
        Some(got)
    }

    // ---- the lock table ----

    /// Requests `mode` on `name` for `t`, waiting if needed; returns the mode then held.
    ///
    /// The immediate grants (a covering re-request, a compatible new request on a head
    /// nobody waits for) are handled here, inlined into the callers; upgrades and blocking
    /// go to [`Self::request_slow`].
    #[inline(always)]
    fn request(
        &self,
        t: &mut TxnLocks,
        name: LockName,
        mode: LockMode,
        timer: &mut Timer,
    ) -> Result<LockMode, LockError> {
        t.stats.requests += 1;
        let txn = t.txn;
        note_shared(name);
        let bucket = self.table.bucket_index(name);
        let mut guard = self.latch(self.table.bucket_at(bucket), timer);
        let index = guard.head_index(name);
        let head = guard.head_at(index);
        match head.grant_of(txn) {
            Some(g) if head.granted[g].mode.covers(mode) => {
                t.stats.immediate += 1;
                Ok(head.granted[g].mode)
            }
            None if head.queue.is_empty() && head.compatible_with_others(txn, mode) => {
                head.granted.push(Grant { txn, mode });
                drop(guard);
                t.stats.immediate += 1;
                t.push_held(name, mode, bucket);
                Ok(mode)
            }
            _ => self.request_slow(t, name, mode, guard, index, timer),
        }
    }

    /// The rest of [`Self::request`]: an upgrade (granted at once when compatible with the
    /// other holders) or a request that must queue. Called with `name`'s bucket latched and
    /// its head at `index`.
    #[cold]
    #[inline(never)]
    fn request_slow(
        &self,
        t: &mut TxnLocks,
        name: LockName,
        mode: LockMode,
        mut guard: SpinGuard<'_, Bucket>,
        index: usize,
        timer: &mut Timer,
    ) -> Result<LockMode, LockError> {
        let txn = t.txn;
        let head = guard.head_at(index);
        let (want, upgrade) = match head.grant_of(txn) {
            Some(g) => {
                let held = head.granted[g].mode;
                debug_assert!(!held.covers(mode), "covered requests are granted inline");
                t.stats.upgrades += 1;
                let want = held.supremum(mode);
                if head.compatible_with_others(txn, want) {
                    head.granted[g].mode = want;
                    if !head.queue.is_empty() {
                        // A holder's mode grew: waiters behind may now wait for it.
                        refresh_edges(head, &mut self.graph());
                    }
                    drop(guard);
                    t.stats.immediate += 1;
                    t.note_upgrade(name, want);
                    return Ok(want);
                }
                (want, true)
            }
            None => (mode, false),
        };

        // Block: queue, register in the wait-for graph, search for a cycle through us.
        t.stats.waits += 1;
        t.slot.arm();
        head.enqueue(Waiter {
            txn,
            mode: want,
            upgrade,
            slot: t.slot.clone(),
        });
        {
            let mut graph = self.graph();
            refresh_edges(head, &mut graph);
            if graph.cycle_through(txn).is_some() {
                withdraw(head, txn, &mut graph);
                drop(graph);
                guard.retire_if_unused(index);
                drop(guard);
                t.slot.disarm();
                t.stats.deadlocks += 1;
                return Err(LockError::Deadlock { victim: txn });
            }
        }
        drop(guard);
        self.wait(t, name, want, upgrade, timer)
    }

    /// [`Self::request`] without the blocking half: `None` (and nothing changed) where
    /// `request` would queue.
    #[inline(always)]
    fn try_request(
        &self,
        t: &mut TxnLocks,
        name: LockName,
        mode: LockMode,
        timer: &mut Timer,
    ) -> Option<LockMode> {
        let txn = t.txn;
        note_shared(name);
        let bucket = self.table.bucket_index(name);
        let mut guard = self.latch(self.table.bucket_at(bucket), timer);
        let index = guard.head_index(name);
        let head = guard.head_at(index);
        let got = match head.grant_of(txn) {
            Some(g) => {
                let held = head.granted[g].mode;
                if held.covers(mode) {
                    held
                } else {
                    let want = held.supremum(mode);
                    if !head.compatible_with_others(txn, want) {
                        return None;
                    }
                    head.granted[g].mode = want;
                    if !head.queue.is_empty() {
                        refresh_edges(head, &mut self.graph());
                    }
                    drop(guard);
                    t.stats.upgrades += 1;
                    t.note_upgrade(name, want);
                    want
                }
            }
            None => {
                // A head created just now has no holders and no queue: granted below.
                if !(head.queue.is_empty() && head.compatible_with_others(txn, mode)) {
                    return None;
                }
                head.granted.push(Grant { txn, mode });
                drop(guard);
                t.push_held(name, mode, bucket);
                mode
            }
        };
        t.stats.requests += 1;
        t.stats.immediate += 1;
        Some(got)
    }

    /// Sleeps until the queued request of `t` on `name` is granted, its transaction is
    /// found on a cycle, or the wait times out.
    fn wait(
        &self,
        t: &mut TxnLocks,
        name: LockName,
        want: LockMode,
        upgrade: bool,
        timer: &mut Timer,
    ) -> Result<LockMode, LockError> {
        let txn = t.txn;
        let started = Instant::now();
        let timeout_at = started + self.config.wait_timeout;
        // Spin on the first wait only: a transaction still blocked after it waits long.
        let mut spin = self.config.spin_wait;
        let outcome = loop {
            let tick = (Instant::now() + self.config.deadlock_check_interval).min(timeout_at);
            if t.slot.wait_until(std::mem::take(&mut spin), tick) {
                break Ok(());
            }
            let mut guard = self.table.latch(name);
            if t.slot.is_granted() {
                break Ok(());
            }
            let timed_out = Instant::now() >= timeout_at;
            let Some(index) = guard.position(name) else {
                unreachable!("{txn} waits on {name}, which has no lock head");
            };
            let head = guard.head_at(index);
            let mut graph = self.graph();
            let victim = !timed_out && graph.cycle_through(txn).is_some();
            if timed_out || victim {
                withdraw(head, txn, &mut graph);
                break Err(if victim {
                    LockError::Deadlock { victim: txn }
                } else {
                    LockError::Timeout { txn, name }
                });
            }
        };
        t.slot.disarm();
        if timer.start.is_some() {
            timer.logical_ns += started.elapsed().as_nanos() as u64;
        }
        match outcome {
            Ok(()) => {
                if upgrade {
                    t.note_upgrade(name, want);
                } else {
                    t.push_held(name, want, self.table.bucket_index(name));
                }
                Ok(want)
            }
            Err(e) => {
                match e {
                    LockError::Deadlock { .. } => t.stats.deadlocks += 1,
                    LockError::Timeout { .. } => t.stats.timeouts += 1,
                }
                Err(e)
            }
        }
    }

    /// Releases `txn`'s grant on `name` (whose head is in bucket `bucket`) and grants what
    /// became grantable.
    #[inline(always)]
    fn release(&self, txn: TxnId, name: LockName, bucket: u32, timer: &mut Timer) {
        debug_assert_eq!(bucket, self.table.bucket_index(name));
        note_shared(name);
        let mut guard = self.latch(self.table.bucket_at(bucket), timer);
        let Some(index) = guard.position(name) else {
            return;
        };
        let head = guard.head_at(index);
        head.remove_grant(txn);
        if !head.queue.is_empty() {
            self.grant_after_release(head);
        }
        guard.retire_if_unused(index);
    }

    /// Grants the waiters a release unblocked and refreshes the wait-for edges of the rest.
    #[cold]
    #[inline(never)]
    fn grant_after_release(&self, head: &mut LockHead) {
        let mut graph = self.graph();
        head.grant_waiters(|g| graph.remove(g));
        refresh_edges(head, &mut graph);
    }

    /// Latches a bucket, timing the wait when the latch is contended and timing is on.
    #[inline(always)]
    fn latch<'a>(&self, bucket: &'a SpinLatch<Bucket>, timer: &mut Timer) -> SpinGuard<'a, Bucket> {
        if timer.start.is_none() {
            return bucket.lock();
        }
        Self::latch_timed(bucket, timer)
    }

    /// [`Self::latch`] with timing on: a `try` first, so only a contended latch is timed.
    #[cold]
    #[inline(never)]
    fn latch_timed<'a>(bucket: &'a SpinLatch<Bucket>, timer: &mut Timer) -> SpinGuard<'a, Bucket> {
        if let Some(guard) = bucket.try_lock() {
            return guard;
        }
        let started = Instant::now();
        let guard = bucket.lock();
        timer.physical_ns += started.elapsed().as_nanos() as u64;
        guard
    }

    #[inline]
    fn timer(&self) -> Timer {
        Timer {
            start: self.config.timing.then(Instant::now),
            physical_ns: 0,
            logical_ns: 0,
        }
    }

    #[inline]
    fn stop(&self, t: &mut TxnLocks, timer: Timer) {
        if let Some(start) = timer.start {
            let total = start.elapsed().as_nanos() as u64;
            t.stats.lock_ns += total.saturating_sub(timer.physical_ns + timer.logical_ns);
            t.stats.physical_contention_ns += timer.physical_ns;
            t.stats.logical_contention_ns += timer.logical_ns;
        }
    }
}

/// Counts a request or release on the database's or a table's one lock head (not
/// partitioned): every thread's transactions latch it.
#[inline(always)]
fn note_shared(name: LockName) {
    if matches!(name, LockName::Database | LockName::Table(_)) {
        shared::bump(Place::LockCoarse);
    }
}

/// Recomputes the wait-for edges of every request queued on `head`.
fn refresh_edges(head: &LockHead, graph: &mut WaitForGraph) {
    for (i, w) in head.queue.iter().enumerate() {
        graph.set_edges(w.txn, head.blockers_of(i));
    }
}

/// Removes `txn`'s queued request from `head` and the graph, then grants what that unblocked.
fn withdraw(head: &mut LockHead, txn: TxnId, graph: &mut WaitForGraph) {
    graph.remove(txn);
    head.dequeue(txn);
    head.grant_waiters(|g| graph.remove(g));
    refresh_edges(head, graph);
}
