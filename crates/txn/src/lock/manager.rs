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
//! Statistics are counted in `TxnLocks` (no shared cache line on the lock path) and added
//! to the manager's atomic totals by `release_all`. With `timing` on, every entry point
//! reads the clock: `Lock` is its time minus the two waits, `Lock-PC` the time spent
//! acquiring a contended bucket latch (a `try` first, so only the contended path is timed),
//! `Lock-LC` the time blocked behind conflicting holders (the TPC-E paper's Figure 2).
//! Waits are measured whether or not `timing` is on, since they read the clock anyway: how
//! many, how long, whether each ended while the waiter spun or slept, and each granted
//! wait's wake-up latency — the granter stamps the grant in the waiter's slot, and the
//! waiter subtracts that stamp from the time it sees the grant (see [`LockStats`]).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use storage::latch::{SpinGuard, SpinLatch};

use super::deadlock::WaitForGraph;
use super::mode::LockMode;
use super::name::LockName;
use super::table::{Bucket, Grant, LockHead, LockTable, WaitEnd, WaitSlot, Waiter};
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
        }
    }
}

/// Buckets of [`LockStats::wake_histogram`].
pub const WAKE_BUCKETS: usize = 16;

/// The shortest wake-up latency of the histogram's second bucket, in ns; each bucket after
/// it starts at twice its predecessor's start.
const WAKE_BUCKET_FIRST_NS: u64 = 256;

/// The histogram bucket of a wake-up latency of `ns`: 0 below 256 ns, then one bucket per
/// power of two (256–511 ns, 512–1023 ns, …), the last from about 4.2 ms up.
fn wake_bucket(ns: u64) -> usize {
    let above = 64 - (ns / WAKE_BUCKET_FIRST_NS).leading_zeros() as usize;
    above.min(WAKE_BUCKETS - 1)
}

/// Totals over all finished transactions (those that called `release_all`).
///
/// The wait fields describe the slow path only: a request that queued (`waits`) waits
/// `wait_ns` in all, and ends granted, a deadlock victim, or timed out. A granted wait ends
/// in one of two ways, counted apart: the waiter saw its grant while it was still spinning
/// (`waits_ended_spinning`), or it had gone to sleep and was woken (`waits_ended_sleeping`).
/// Its *wake-up latency* runs from the moment the releaser granted it (a timestamp the
/// granter leaves in the wait slot) to the moment the waiter runs again and sees it:
/// summed in `wake_ns`, its largest in `wake_ns_max`, its distribution in `wake_histogram`.
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
    /// Time blocked in all waits (as `logical_contention_ns`, but measured with `timing`
    /// off too: the clock is read only on the waiting path).
    pub wait_ns: u64,
    /// Granted waits whose waiter saw the grant while spinning.
    pub waits_ended_spinning: u64,
    /// Granted waits whose waiter was asleep and was woken.
    pub waits_ended_sleeping: u64,
    /// Wake-up latency summed over the granted waits.
    pub wake_ns: u64,
    /// The longest wake-up latency (a maximum, not a sum, in the totals too).
    pub wake_ns_max: u64,
    /// Granted waits by wake-up latency: bucket 0 below 256 ns, bucket `i` from
    /// 256·2^(i−1) ns up to twice that, the last bucket everything from about 4.2 ms.
    pub wake_histogram: [u64; WAKE_BUCKETS],
}

/// Fields of `LockStats::to_array`: eleven counters and times, five wait fields, the
/// histogram.
const STAT_FIELDS: usize = 16 + WAKE_BUCKETS;

/// The index of `wake_ns_max` in `LockStats::to_array` (combined with `fetch_max`, not added).
const WAKE_NS_MAX_FIELD: usize = 15;

impl LockStats {
    /// Granted waits: those ended spinning plus those ended sleeping.
    pub fn waits_granted(&self) -> u64 {
        self.waits_ended_spinning + self.waits_ended_sleeping
    }

    /// The mean wake-up latency of the granted waits, in ns (0 when none).
    pub fn wake_ns_mean(&self) -> u64 {
        self.wake_ns.checked_div(self.waits_granted()).unwrap_or(0)
    }

    /// An upper bound on the `q` quantile (0.0–1.0) of the wake-up latency, in ns: the end
    /// of the histogram bucket that holds it (the largest latency for the last bucket);
    /// 0 when no wait was granted.
    pub fn wake_ns_quantile(&self, q: f64) -> u64 {
        let count: u64 = self.wake_histogram.iter().sum();
        if count == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &n) in self.wake_histogram.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return if i + 1 == WAKE_BUCKETS {
                    self.wake_ns_max
                } else {
                    (WAKE_BUCKET_FIRST_NS << i).min(self.wake_ns_max)
                };
            }
        }
        self.wake_ns_max
    }

    /// Counts one granted wait that waited `wait_ns` and was woken `wake_ns` after its grant.
    fn note_granted(&mut self, wait_ns: u64, wake_ns: u64, slept: bool) {
        if slept {
            self.waits_ended_sleeping += 1;
        } else {
            self.waits_ended_spinning += 1;
        }
        self.wait_ns += wait_ns;
        self.wake_ns += wake_ns;
        self.wake_ns_max = self.wake_ns_max.max(wake_ns);
        self.wake_histogram[wake_bucket(wake_ns)] += 1;
    }

    fn to_array(self) -> [u64; STAT_FIELDS] {
        let mut a = [0; STAT_FIELDS];
        a[..16].copy_from_slice(&[
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
            self.wait_ns,
            self.waits_ended_spinning,
            self.waits_ended_sleeping,
            self.wake_ns,
            self.wake_ns_max,
        ]);
        a[16..].copy_from_slice(&self.wake_histogram);
        a
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
            wait_ns: a[11],
            waits_ended_spinning: a[12],
            waits_ended_sleeping: a[13],
            wake_ns: a[14],
            wake_ns_max: a[WAKE_NS_MAX_FIELD],
            wake_histogram: std::array::from_fn(|i| a[16 + i]),
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
    /// Totals of finished transactions, indexed like `LockStats::to_array`.
    totals: [AtomicU64; STAT_FIELDS],
    /// The origin of the clock that stamps grants (read only on the waiting path).
    epoch: Instant,
}

impl LockManager {
    pub fn new(config: LockConfig) -> Self {
        LockManager {
            table: LockTable::new(config.buckets, config.latching),
            config,
            graph: Mutex::new(WaitForGraph::new()),
            totals: Default::default(),
            epoch: Instant::now(),
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
        TxnLocks {
            txn,
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
            .request(t, name, mode, &mut timer)
            .map(|got| match name {
                LockName::Database => t.database = Some(got),
                LockName::Table(table) => {
                    let i = t.table_index(table);
                    t.tables[i].mode = Some(got);
                }
                LockName::Page { .. } | LockName::Record { .. } => {}
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
        for (i, (total, value)) in self.totals.iter().zip(t.stats.to_array()).enumerate() {
            if value != 0 {
                if i == WAKE_NS_MAX_FIELD {
                    total.fetch_max(value, Ordering::Relaxed);
                } else {
                    total.fetch_add(value, Ordering::Relaxed);
                }
            }
        }
        t.stats = LockStats::default();
    }

    /// Totals over the transactions finished so far.
    pub fn stats(&self) -> LockStats {
        LockStats::from_array(std::array::from_fn(|i| {
            self.totals[i].load(Ordering::Relaxed)
        }))
    }

    pub fn reset_stats(&self) {
        for total in &self.totals {
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
        let graph = self.graph.lock();
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
        self.graph.lock().is_waiting(txn)
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
                    match self.try_request(t, LockName::Database, target, timer) {
                        Some(got) => t.database = Some(got),
                        None => return false,
                    }
                }
                let i = t.table_index(table);
                let target = t.tables[i]
                    .mode
                    .map_or(intention, |m| m.supremum(intention));
                match self.try_request(t, LockName::Table(table), target, timer) {
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
        let got = self.request(t, LockName::Table(t.tables[i].table), target, timer)?;
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
        let got = self.request(t, LockName::Database, target, timer)?;
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
                        refresh_edges(head, &mut self.graph.lock());
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
            let mut graph = self.graph.lock();
            refresh_edges(head, &mut graph);
            if graph.cycle_through(txn).is_some() {
                withdraw(head, txn, &mut graph, self.now_ns());
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
                        refresh_edges(head, &mut self.graph.lock());
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
            match t.slot.wait_until(std::mem::take(&mut spin), tick) {
                WaitEnd::Spinning => break Ok(false),
                WaitEnd::Sleeping => break Ok(true),
                WaitEnd::Deadline => {}
            }
            let mut guard = self.table.latch(name);
            if t.slot.is_granted() {
                break Ok(true);
            }
            let timed_out = Instant::now() >= timeout_at;
            let Some(index) = guard.position(name) else {
                unreachable!("{txn} waits on {name}, which has no lock head");
            };
            let head = guard.head_at(index);
            let mut graph = self.graph.lock();
            let victim = !timed_out && graph.cycle_through(txn).is_some();
            if timed_out || victim {
                withdraw(head, txn, &mut graph, self.now_ns());
                break Err(if victim {
                    LockError::Deadlock { victim: txn }
                } else {
                    LockError::Timeout { txn, name }
                });
            }
        };
        let ended_ns = self.now_ns();
        let wait_ns = started.elapsed().as_nanos() as u64;
        if timer.start.is_some() {
            timer.logical_ns += wait_ns;
        }
        match outcome {
            Ok(slept) => {
                let wake_ns = ended_ns.saturating_sub(t.slot.granted_at_ns());
                t.slot.disarm();
                t.stats.note_granted(wait_ns, wake_ns, slept);
                if upgrade {
                    t.note_upgrade(name, want);
                } else {
                    t.push_held(name, want, self.table.bucket_index(name));
                }
                Ok(want)
            }
            Err(e) => {
                t.slot.disarm();
                t.stats.wait_ns += wait_ns;
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
        let now_ns = self.now_ns();
        let mut graph = self.graph.lock();
        head.grant_waiters(now_ns, |g| graph.remove(g));
        refresh_edges(head, &mut graph);
    }

    /// The clock that stamps grants: ns since the manager was created.
    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
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

/// Recomputes the wait-for edges of every request queued on `head`.
fn refresh_edges(head: &LockHead, graph: &mut WaitForGraph) {
    for (i, w) in head.queue.iter().enumerate() {
        graph.set_edges(w.txn, head.blockers_of(i));
    }
}

/// Removes `txn`'s queued request from `head` and the graph, then grants what that unblocked.
/// `now_ns` stamps those grants.
fn withdraw(head: &mut LockHead, txn: TxnId, graph: &mut WaitForGraph, now_ns: u64) {
    graph.remove(txn);
    head.dequeue(txn);
    head.grant_waiters(now_ns, |g| graph.remove(g));
    refresh_edges(head, graph);
}

#[cfg(test)]
mod unit_tests {
    use super::*;

    #[test]
    fn wake_buckets_double_from_256_ns() {
        assert_eq!(wake_bucket(0), 0);
        assert_eq!(wake_bucket(255), 0);
        assert_eq!(wake_bucket(256), 1);
        assert_eq!(wake_bucket(511), 1);
        assert_eq!(wake_bucket(512), 2);
        assert_eq!(wake_bucket(1_000), 2);
        assert_eq!(wake_bucket(20_000), 7);
        assert_eq!(wake_bucket(WAKE_BUCKET_FIRST_NS << 14), WAKE_BUCKETS - 1);
        assert_eq!(wake_bucket(u64::MAX), WAKE_BUCKETS - 1);
    }

    #[test]
    fn stats_survive_their_array_form() {
        let mut s = LockStats {
            requests: 1,
            immediate: 2,
            waits: 3,
            deadlocks: 4,
            timeouts: 5,
            escalations: 6,
            upgrades: 7,
            refused: 8,
            lock_ns: 9,
            physical_contention_ns: 10,
            logical_contention_ns: 11,
            wait_ns: 12,
            waits_ended_spinning: 13,
            waits_ended_sleeping: 14,
            wake_ns: 15,
            wake_ns_max: 16,
            wake_histogram: [0; WAKE_BUCKETS],
        };
        for (i, n) in s.wake_histogram.iter_mut().enumerate() {
            *n = 100 + i as u64;
        }
        assert_eq!(LockStats::from_array(s.to_array()), s);
        assert_eq!(s.to_array()[WAKE_NS_MAX_FIELD], 16);
    }
}
