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
//! and waits on the transaction's wait slot with the bucket latch released. See
//! [`super::deadlock`] for when waiting ends in a deadlock error.
//!
//! Waiting. A wait should cost about what it waits for: in an OLTP mix that is the rest of
//! one short transaction, tens of µs, while a sleep costs two system calls plus however long
//! the scheduler takes to run the woken thread again (on a virtual machine whose other core
//! is idle, or a machine whose cores are busy with other work, up to milliseconds). So:
//!
//! ```text
//!   request queues
//!     ├─ at the front of its queue, and spinning pays ─▶ spin ─┬─ granted: done
//!     │                                                        └─ no grant: register, sleep
//!     └─ otherwise ─▶ register (search for a cycle), sleep
//!   asleep
//!     ├─ granted: unparked by the releaser, done
//!     ├─ nudged (a grant moved it to the front): spin again, if spinning pays
//!     └─ every deadlock_check_interval: search again, or time out
//!   release: grant under the bucket latch (an atomic swap in the waiter's slot, and the
//!            grant's timestamp); unpark the sleepers after the latch is released
//! ```
//!
//! * Only a request at the *front* of its queue (every request ahead of it compatible with
//!   it) spins: it is granted when the current holders release. One further back sleeps
//!   at once, and is *nudged* awake when a grant moves it to the front, so that its wake-up
//!   overlaps the new holder's work and it spins, not sleeps, through that holder's end.
//! * A spin lasts as long as nine in ten waits of front requests (`spin_limit`), within
//!   [`LockConfig::spin_wait`]. Waiters spin only while spinning pays: while at least half
//!   of the recent spins saw their grant (`spin_for_front`). Otherwise (holders that are
//!   descheduled or run long) they sleep at once, and one front wait in sixteen spins as a
//!   probe; nudges stop too.
//! * A waiter joins the wait-for graph only when it is about to sleep, so a wait that ends
//!   spinning never takes the graph's global mutex, and a release takes it only when the
//!   head has a registered waiter. Deadlocks among spinners are found when they stop
//!   spinning ([`super::deadlock`]).
//! * The releaser grants under the bucket latch but unparks sleepers after releasing it,
//!   one unpark per sleeping grantee, so no system call lengthens a latch hold.
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
//! Waits are measured whether or not `timing` is on, since they read the clock anyway: how
//! many, how long, whether each ended while the waiter spun or slept, and each granted
//! wait's wake-up latency — the granter stamps the grant in the waiter's slot, and the
//! waiter subtracts that stamp from the time it sees the grant (see [`LockStats`]).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam::utils::CachePadded;
use parking_lot::Mutex;
use storage::latch::{SpinGuard, SpinLatch};
use storage::shared::{self, Place};

use super::deadlock::{DeadlockReport, WaitForGraph};
use super::mode::LockMode;
use super::name::LockName;
use super::table::{
    wake, Bucket, Grant, LockHead, LockTable, Sleep, WaitSlot, Waiter, Wakes, UNBOUND,
};
use super::{KeyRank, WHOLE_GAP};
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
    /// bucket array (16 KB) and the lock heads in use in cache: a transaction holds a few
    /// dozen locks, and a table of 4,096 buckets made each record lock miss the cache twice,
    /// on its bucket and on its head (the full engine ran 6–25% slower on one thread). With
    /// many threads the table must grow with them (the engine asks for 256 per thread):
    /// 16 threads holding some 50 locks each on 256 buckets met in most of them. Past 256,
    /// the table is cut into regions of 256 that keep a leading key column's record locks
    /// together (see `table.rs`).
    pub buckets: usize,
    /// How often a blocked transaction searches the wait-for graph again (a backstop to
    /// the search made when it blocks).
    pub deadlock_check_interval: Duration,
    /// The longest a blocked transaction spins, watching for its grant, before it sleeps
    /// (zero: it does not spin). Most waits in an OLTP mix last part of one
    /// short transaction, tens of µs; sleeping and being woken costs two system calls and
    /// the time an idle core takes to wake, which can exceed the wait. Within this bound a
    /// waiter spins for twice the recent waits' length (see `LockManager::spin_limit`), and
    /// only a request at the front of its queue spins at all: one behind an incompatible
    /// waiter sleeps at once and is nudged awake when it reaches the front.
    pub spin_wait: Duration,
    /// Partitions of the database's and each table's lock (1: not partitioned). Every
    /// transaction takes `IX` or `IS` on the database and on each table it touches, so with
    /// one lock per table every transaction of every thread latches the same few lock
    /// heads and appends to the same grant lists. Partitioned, an intention mode is asked of
    /// the requesting thread's partition only and any other mode of every partition, so
    /// threads on distinct partitions share nothing for their intention locks while `S`, `SIX`
    /// and `X` on a table still conflict with every intention below it.
    pub coarse_partitions: usize,
    /// Attribute lock waits to other transactions' I/O (the Charm paper's Table 1): a
    /// blocked transaction wakes every [`IoProbe::period`], walks the wait-for graph from
    /// itself, and counts the slice since its last look as due to I/O if any transaction on
    /// that chain was inside a physical read ([`TxnLocks::wait_io_ns`]). `None`: no sampling.
    pub io_probe: Option<IoProbe>,
    /// Every transaction stays on the thread that began it, and a thread runs one of its
    /// transactions at a time while the others wait for it (a server's worker serving many
    /// connections, each with an open transaction between requests). A request that would
    /// wait for a transaction bound to its own thread (directly, or behind a waiter that
    /// does) then fails at once with [`LockError::SameThread`]: that holder cannot run again
    /// until the thread stops waiting; and in the wait-for graph a bound transaction that is
    /// not running waits for its thread's waiter, so longer cycles through the thread are
    /// deadlocks ([`super::deadlock`]). Off (the default), transactions may move between
    /// threads and such a wait ends when the holder finishes, or by the timeout.
    pub thread_bound: bool,
}

/// Says whether a transaction is inside a physical read now (see
/// [`LockConfig::io_probe`]), and how often a blocked transaction asks.
#[derive(Clone, Copy)]
pub struct IoProbe {
    pub in_read: fn(TxnId) -> bool,
    pub period: Duration,
}

impl std::fmt::Debug for IoProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IoProbe every {:?}", self.period)
    }
}

/// Probes compare by period only: a function's address is not a stable identity.
impl PartialEq for IoProbe {
    fn eq(&self, other: &Self) -> bool {
        self.period == other.period
    }
}

impl Eq for IoProbe {}

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
            io_probe: None,
            thread_bound: false,
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

/// What a waiter was doing when it saw its grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WaitEnd {
    Spinning,
    Sleeping,
}

/// Totals over all finished transactions (those that called `release_all`).
///
/// The wait fields describe the slow path only: a request that queued (`waits`) waits
/// `wait_ns` in all, and ends granted, a deadlock victim, or timed out. A granted wait ends
/// in one of two ways, counted apart: the waiter saw its grant before it slept (while it
/// spun, `waits_ended_spinning`), or it had gone to sleep and was woken
/// (`waits_ended_sleeping`).
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
    /// Requests refused as deadlock victims: on a cycle of the wait-for graph (with
    /// [`LockConfig::thread_bound`], cycles through a thread included).
    pub deadlocks: u64,
    /// Requests refused because they would have waited for a transaction of their own
    /// thread ([`LockConfig::thread_bound`], [`LockError::SameThread`]): that holder cannot
    /// run while its thread waits, so no wait is begun. Not counted in `deadlocks`: a server
    /// parks such a request and runs it again, and no cycle was found.
    pub same_thread: u64,
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
/// same-thread refusals, the histogram.
const STAT_FIELDS: usize = HISTOGRAM_FIELD + WAKE_BUCKETS;

/// Where `to_array` puts the wake-up histogram's first bucket.
const HISTOGRAM_FIELD: usize = 17;

/// The index of `wake_ns_max` in `LockStats::to_array` (combined with `fetch_max`, not added).
const WAKE_NS_MAX_FIELD: usize = 15;
/// Where `to_array` puts `requests` and `immediate`.
const REQUESTS_FIELD: usize = 0;
const IMMEDIATE_FIELD: usize = 1;

/// Shards of the statistics totals: more than the threads of the machines measured.
const TOTAL_SHARDS: usize = 64;

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

    /// Counts one granted wait that waited `wait_ns`, ended `how`, and saw its grant
    /// `wake_ns` after it was made.
    fn note_granted(&mut self, wait_ns: u64, wake_ns: u64, how: WaitEnd) {
        match how {
            WaitEnd::Spinning => self.waits_ended_spinning += 1,
            WaitEnd::Sleeping => self.waits_ended_sleeping += 1,
        }
        self.wait_ns += wait_ns;
        self.wake_ns += wake_ns;
        self.wake_ns_max = self.wake_ns_max.max(wake_ns);
        self.wake_histogram[wake_bucket(wake_ns)] += 1;
    }

    fn to_array(self) -> [u64; STAT_FIELDS] {
        let mut a = [0; STAT_FIELDS];
        a[..HISTOGRAM_FIELD].copy_from_slice(&[
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
            self.same_thread,
        ]);
        a[HISTOGRAM_FIELD..].copy_from_slice(&self.wake_histogram);
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
            same_thread: a[16],
            wake_histogram: std::array::from_fn(|i| a[HISTOGRAM_FIELD + i]),
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
    /// The thread it is bound to (with [`LockConfig::thread_bound`]; else `UNBOUND`).
    home: u32,
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
    /// Of `stats.wait_ns`, the time a transaction on the blocking chain was inside a
    /// physical read (sampled; only with [`LockConfig::io_probe`]).
    wait_io_ns: u64,
    /// Record locks let go before the transaction's end (read committed's reads, an
    /// insert's waited-for next key): no longer in `held`, still taken.
    released_early: u64,
    /// The holder a request of this transaction would have waited for, on its own thread
    /// ([`LockError::SameThread`]), the last time one was refused so.
    refused_by: Option<TxnId>,
}

impl TxnLocks {
    pub fn txn(&self) -> TxnId {
        self.txn
    }

    /// The transaction of its own thread that a request of this one was last refused for
    /// ([`LockError::SameThread`]'s holder): the one whose end may let it go on.
    pub fn refused_by(&self) -> Option<TxnId> {
        self.refused_by
    }

    /// Forgets the last refusal: [`TxnLocks::refused_by`] names none until the next.
    pub fn forget_refusal(&mut self) {
        self.refused_by = None;
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

    /// Record locks this transaction let go of before its end, so that `held` no longer
    /// names them: with `held`'s record locks, every record lock it took.
    pub fn released_early(&self) -> u64 {
        self.released_early
    }

    /// Of this transaction's lock wait so far, the time during which a transaction on its
    /// blocking chain was inside a physical read (see [`LockConfig::io_probe`]).
    pub fn wait_io_ns(&self) -> u64 {
        self.wait_io_ns
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
        self.wait_io_ns = 0;
        self.released_early = 0;
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

/// The shortest spin of a waiter that spins at all, in ns (see `LockManager::spin_limit`).
const SPIN_FLOOR_NS: u64 = 2_000;

/// The range of the wait estimate (`wait_ns_p90`), in ns: from 1 µs up to this many
/// `spin_wait`s, so that after a burst of long waits a few dozen short ones bring spinning
/// back.
const WAIT_FLOOR_NS: u64 = 1_000;
const WAIT_CEILING_SPINS: u64 = 4;

/// The quantile `wait_ns_p90` settles at, as the ratio of its step up (a wait longer than the
/// estimate) to its step down: 9 to 1 settles where one wait in ten is longer.
const WAIT_STEPS_UP: u64 = 9;

/// `LockManager::spin_score` of spins that all succeed; waiters spin while the score is at
/// least `SPIN_SCORE_ON` (half of the recent spins saw their grant), and otherwise one
/// front wait in `SPIN_PROBE_EVERY` spins as a probe.
const SPIN_SCORE_ONE: u32 = 1024;
const SPIN_SCORE_ON: u32 = SPIN_SCORE_ONE / 2;
const SPIN_PROBE_EVERY: u32 = 16;

/// How a blocked request begins its wait (decided under the bucket latch as it queues).
#[derive(Clone, Copy, Debug)]
struct Spin {
    /// At the front of its queue (see `LockHead::is_front`): its wait measures the holders'
    /// remaining time, and feeds the estimate that bounds spinning.
    front: bool,
    /// Spins before it sleeps: it registers in the wait-for graph only then.
    spins: bool,
    /// How long it spins.
    spin: Duration,
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
    /// Who waits for whom, among the waiters about to sleep or asleep (spinners are not in
    /// it). Taken after a bucket latch, never before one; only when a waiter registers and
    /// when a head with registered waiters changes.
    graph: Mutex<WaitForGraph>,
    /// Totals of finished transactions, indexed like `LockStats::to_array`, one shard per
    /// thread (`thread_index % TOTAL_SHARDS`) on cache lines of its own: every transaction adds
    /// to them, so one set of totals was a line every thread wrote at every commit.
    totals: Box<[CachePadded<[AtomicU64; STAT_FIELDS]>]>,
    /// The origin of the clock that stamps grants (read only on the waiting path).
    epoch: Instant,
    /// A running estimate of the 90th percentile of the waits of requests queued at the
    /// front (grant time minus queueing time), which bounds how long waiters spin
    /// (`spin_limit`). Written by waiters only, racily: a lost update costs nothing.
    wait_ns_p90: AtomicU64,
    /// How often recent spins saw their grant, in 1024ths (a moving average): waiters spin
    /// while it is at least `SPIN_SCORE_ON` (`spin_for_front`). Racy like `wait_ns_p90`.
    spin_score: AtomicU32,
    /// Front waits that did not spin because spinning was off: every `SPIN_PROBE_EVERY`th
    /// spins anyway, a probe that lets the score recover.
    spin_probes: AtomicU32,
    /// [`LockConfig::thread_bound`], as now set ([`LockManager::set_thread_bound`]); read
    /// once per transaction, at `begin`.
    thread_bound: AtomicBool,
}

impl LockManager {
    pub fn new(config: LockConfig) -> Self {
        LockManager {
            table: LockTable::new(config.buckets, config.latching),
            graph: Mutex::new(WaitForGraph::new()),
            totals: (0..TOTAL_SHARDS)
                .map(|_| CachePadded::new(std::array::from_fn(|_| AtomicU64::new(0))))
                .collect(),
            epoch: Instant::now(),
            // With no wait seen yet, a waiter spins for half of `spin_wait`.
            wait_ns_p90: AtomicU64::new(config.spin_wait.as_nanos() as u64 / 2),
            spin_score: AtomicU32::new(SPIN_SCORE_ONE),
            spin_probes: AtomicU32::new(0),
            thread_bound: AtomicBool::new(config.thread_bound),
            config,
        }
    }

    pub fn config(&self) -> &LockConfig {
        &self.config
    }

    /// Binds the transactions begun from now on to their threads, or stops binding them
    /// ([`LockConfig::thread_bound`]): a server turns it on while its workers keep their
    /// connections' transactions.
    pub fn set_thread_bound(&self, on: bool) {
        self.thread_bound.store(on, Ordering::Relaxed);
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
        let partition = if parts > 1 {
            (storage::shard::thread_index() % parts) as u16
        } else {
            0
        };
        let home = if self.thread_bound.load(Ordering::Relaxed) {
            storage::shard::thread_index() as u32
        } else {
            UNBOUND
        };
        TxnLocks {
            txn,
            partition,
            home,
            held,
            held_buckets,
            database: None,
            tables,
            slot,
            stats: LockStats::default(),
            wait_io_ns: 0,
            released_early: 0,
            refused_by: None,
        }
    }

    /// Locks a record, first taking the intention locks above it (`IS`/`IX` on database
    /// and table) unless already held or covered; escalates when the table's leaf-lock
    /// count reaches the threshold. `floor`: where in the gap below the record the lock
    /// guards against inserts ([`KeyRank`]; [`WHOLE_GAP`] for all of it); a transaction
    /// that asks for a record again keeps the lower of its floors.
    pub fn lock_record(
        &self,
        t: &mut TxnLocks,
        table: u32,
        key: u64,
        mode: LockMode,
        floor: KeyRank,
    ) -> Result<(), LockError> {
        let mut timer = self.timer();
        let name = LockName::Record { table, key };
        let r = self.lock_leaf(t, table, name, mode, floor, &mut timer);
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
        floor: KeyRank,
    ) -> Result<bool, LockError> {
        Ok(self.try_record(t, table, key, mode, floor, false))
    }

    /// ARIES/IM's *instant-duration* request, made while holding a page latch: `Ok(true)`
    /// where `mode` on the record could be granted right now (or is held already), without
    /// keeping a grant; `Ok(false)` where it would have to wait, nothing queued. An insert
    /// asks this of the key after its own: it must not slip into a gap a scan has locked
    /// (the scan holds the key after the gap), but once its entry is in, the entry's own
    /// lock, held to commit, guards it; holding the next key too would only make later
    /// readers and deletes of that key wait for the insert. `inserting` is the rank of the
    /// key the insert adds: holders whose floor lies above it guard none of the gap it
    /// lands in and do not count (see [`KeyRank`]). Intention locks above are requested,
    /// and kept, as by [`Self::try_lock_record`]; a refusal counts in
    /// [`LockStats::refused`], a success as an immediate request.
    pub fn try_lock_record_instant(
        &self,
        t: &mut TxnLocks,
        table: u32,
        key: u64,
        mode: LockMode,
        inserting: KeyRank,
    ) -> Result<bool, LockError> {
        Ok(self.try_record(t, table, key, mode, inserting, true))
    }

    /// [`Self::try_lock_record`], or with `instant` [`Self::try_lock_record_instant`]
    /// (`rank` is the floor of the one and the inserted key of the other).
    fn try_record(
        &self,
        t: &mut TxnLocks,
        table: u32,
        key: u64,
        mode: LockMode,
        rank: KeyRank,
        instant: bool,
    ) -> bool {
        let mut timer = self.timer();
        let name = LockName::Record { table, key };
        let r = self.try_lock_leaf(t, table, name, mode, rank, instant, &mut timer);
        t.stats.refused += u64::from(!r);
        self.stop(t, timer);
        r
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
        let name = LockName::Page { table, page };
        let r = self.lock_leaf(t, table, name, mode, WHOLE_GAP, &mut timer);
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

    /// Releases `t`'s lock on one record before the transaction ends; whether it held one
    /// (an escalated table's records have none of their own). Strict 2PL keeps every lock a
    /// transaction read or wrote under to its end: this is for a lock that guarded a check
    /// for an instant only, as when an insert refused by
    /// [`try_lock_record_instant`](Self::try_lock_record_instant) waited for the key after
    /// its own and has since put its entry in. Waiters it unblocks are granted.
    pub fn release_record(&self, t: &mut TxnLocks, table: u32, key: u64) -> bool {
        let name = LockName::Record { table, key };
        let Some(i) = t.held.iter().rposition(|(n, _)| *n == name) else {
            return false;
        };
        let mut timer = self.timer();
        self.release_held(t, i, &mut timer);
        self.stop(t, timer);
        true
    }

    /// The floor of the record lock `t` holds on `key` of lock space `table`: how far down
    /// the gap below the key that lock guards (a scan's locks guard from its range's low
    /// end). None where `t` holds no such lock (nor one escalated to its table).
    pub fn held_floor(&self, t: &TxnLocks, table: u32, key: u64) -> Option<KeyRank> {
        let name = LockName::Record { table, key };
        let i = t.held.iter().rposition(|(n, _)| *n == name)?;
        let mut timer = self.timer();
        let mut guard = self.latch(self.table.bucket_at(t.held_buckets[i]), &mut timer);
        let index = guard.position(name)?;
        let head = guard.head_at(index);
        let g = head.grant_of(t.txn)?;
        Some(head.granted[g].floor)
    }

    /// Releases `t.held[i]`, a record or page lock, before the transaction's end: out of the list
    /// (whose order means nothing: `held` names each lock once, so the last entry takes its
    /// place), one leaf lock fewer in its table, its waiters granted.
    fn release_held(&self, t: &mut TxnLocks, i: usize, timer: &mut Timer) {
        let (name, _) = t.held.swap_remove(i);
        let bucket = t.held_buckets.swap_remove(i);
        t.released_early += 1;
        if let LockName::Record { table, .. } | LockName::Page { table, .. } = name {
            let ti = t.table_index(table);
            t.tables[ti].leaf_count = t.tables[ti].leaf_count.saturating_sub(1);
        }
        self.release(t.txn, name, bucket, timer);
    }

    /// Releases the shared record and page locks `t` took since it held `mark` locks (a
    /// `held().len()` read before): a read at isolation level 1 (read committed) lets go of
    /// its read locks as the read ends, under record- or page-level locking. Locks held before the mark stay, and so do the
    /// exclusive ones and the intention locks above; returns how many went.
    pub fn release_shared_leaves_from(&self, t: &mut TxnLocks, mark: usize) -> usize {
        let mut released = 0;
        let mut timer = self.timer();
        // Downward, so that each `swap_remove` brings in an entry already looked at.
        for i in (mark..t.held.len()).rev() {
            if let (LockName::Record { .. } | LockName::Page { .. }, LockMode::S) = t.held[i] {
                self.release_held(t, i, &mut timer);
                released += 1;
            }
        }
        self.stop(t, timer);
        released
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
        let st = &t.stats;
        // Most transactions only requested and were granted at once: add those two and skip
        // the walk over every field (33 of them with the wake-up histogram).
        let only_grants = st.waits == 0
            && st.deadlocks == 0
            && st.same_thread == 0
            && st.timeouts == 0
            && st.escalations == 0
            && st.upgrades == 0
            && st.refused == 0
            && st.lock_ns == 0
            && st.physical_contention_ns == 0
            && st.logical_contention_ns == 0;
        if only_grants {
            shard[REQUESTS_FIELD].fetch_add(st.requests, Ordering::Relaxed);
            shard[IMMEDIATE_FIELD].fetch_add(st.immediate, Ordering::Relaxed);
            t.stats.requests = 0;
            t.stats.immediate = 0;
            return;
        }
        for (i, (total, value)) in shard.iter().zip(t.stats.to_array()).enumerate() {
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
            let each = self
                .totals
                .iter()
                .map(|shard| shard[i].load(Ordering::Relaxed));
            if i == WAKE_NS_MAX_FIELD {
                each.max().unwrap_or(0)
            } else {
                each.sum()
            }
        }))
    }

    pub fn reset_stats(&self) {
        for total in self.totals.iter().flat_map(|shard| shard.iter()) {
            total.store(0, Ordering::Relaxed);
        }
    }

    /// The last deadlock broken (its cycle, each member with the lock it waited for), if
    /// any since the manager began: what a count of deadlocks does not say.
    pub fn last_deadlock(&self) -> Option<DeadlockReport> {
        self.graph.lock().last_deadlock().cloned()
    }

    /// Lock names with a head in the table (granted or waited for).
    pub fn lock_name_count(&self) -> usize {
        self.table.buckets().map(|b| b.lock().heads().len()).sum()
    }

    /// Panics unless every head satisfies the lock table's invariants and the wait-for
    /// graph has exactly the registered queued requests as nodes. Call when no request is in
    /// flight (latches are taken one bucket at a time, so a concurrent request may look
    /// torn).
    pub fn check_invariants(&self) {
        let mut registered = Vec::new();
        for bucket in self.table.buckets() {
            let guard = bucket.lock();
            for head in guard.heads() {
                head.check_invariants();
                registered.extend(head.queue.iter().filter(|w| w.registered).map(|w| w.txn));
            }
        }
        let graph = self.graph();
        assert_eq!(
            graph.len(),
            registered.len(),
            "wait-for graph has {} nodes, queues hold {} registered requests",
            graph.len(),
            registered.len()
        );
        for txn in registered {
            assert!(
                graph.is_waiting(txn),
                "{txn} registered but not in the wait-for graph"
            );
        }
    }

    /// Whether `txn` has a request queued in the lock table (tests use it to sequence
    /// threads).
    #[cfg(test)]
    pub(crate) fn is_waiting(&self, txn: TxnId) -> bool {
        self.table.buckets().any(|b| {
            b.lock()
                .heads()
                .iter()
                .any(|h| h.queue.iter().any(|w| w.txn == txn))
        })
    }

    /// Whether `txn` is in the wait-for graph: queued and about to sleep or asleep.
    #[cfg(test)]
    pub(crate) fn is_registered(&self, txn: TxnId) -> bool {
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
        floor: KeyRank,
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
        self.request(t, name, mode, floor, timer)?;
        if t.held.len() > held_before {
            t.tables[i].leaf_count += 1;
        }
        Ok(())
    }

    /// [`Self::lock_leaf`] that never waits: false where it would have to. With `instant`,
    /// only the check that an insert of a key ranked `rank` into the gap below the leaf
    /// could go ahead, nothing kept (the intention locks above are taken either way);
    /// without, `rank` is the floor of the lock it takes.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn try_lock_leaf(
        &self,
        t: &mut TxnLocks,
        table: u32,
        name: LockName,
        mode: LockMode,
        rank: KeyRank,
        instant: bool,
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
        if instant {
            return self.grantable(t, name, mode, rank, timer);
        }
        let held_before = t.held.len();
        if self.try_request(t, name, mode, rank, timer).is_none() {
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

    /// [`withdraw_request`] stamped with the manager's clock and nudge policy; returns the
    /// threads to unpark once the bucket latch is released.
    fn withdraw(&self, head: &mut LockHead, txn: TxnId, graph: &mut WaitForGraph) -> Wakes {
        let mut wakes = Wakes::new();
        withdraw_request(head, txn, graph, self.now_ns(), self.nudges(), &mut wakes);
        wakes
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
            return self.request(t, name, mode, WHOLE_GAP, timer);
        }
        if mode.intention() == mode {
            return self.request(t, name.partition(t.partition), mode, WHOLE_GAP, timer);
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
            let part = name.partition(part as u16);
            got = got.supremum(self.request(t, part, mode, WHOLE_GAP, timer)?);
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
            return self.try_request(t, name, mode, WHOLE_GAP, timer);
        }
        if mode.intention() == mode {
            return self.try_request(t, name.partition(t.partition), mode, WHOLE_GAP, timer);
        }
        let mut got = mode;
        for part in 0..parts.min(1 << 15) {
            let part = name.partition(part as u16);
            got = got.supremum(self.try_request(t, part, mode, WHOLE_GAP, timer)?);
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
        floor: KeyRank,
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
                let grant = &mut head.granted[g];
                grant.floor = grant.floor.min(floor);
                t.stats.immediate += 1;
                Ok(grant.mode)
            }
            None if head.queue.is_empty() && head.compatible_with_others(txn, mode) => {
                head.granted.push(Grant {
                    txn,
                    mode,
                    home: t.home,
                    floor,
                });
                drop(guard);
                t.stats.immediate += 1;
                t.push_held(name, mode, bucket);
                Ok(mode)
            }
            _ => self.request_slow(t, name, (mode, floor), guard, index, timer),
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
        (mode, floor): (LockMode, KeyRank),
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
                // The wider guard at once: a waiting upgrade guards no less than the grant.
                head.granted[g].floor = head.granted[g].floor.min(floor);
                if head.compatible_with_others(txn, want) {
                    head.granted[g].mode = want;
                    if head.has_registered() {
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

        // A wait for a transaction this thread would have to run: a deadlock through the
        // thread (see `LockConfig::thread_bound`), refused before it queues.
        let ahead = if upgrade {
            head.queue.iter().take_while(|w| w.upgrade).count()
        } else {
            head.queue.len()
        };
        if let Some(holder) = head.own_thread_blocker(txn, t.home, want, ahead) {
            drop(guard);
            t.stats.same_thread += 1;
            t.refused_by = Some(holder);
            return Err(LockError::SameThread { txn, holder, name });
        }

        // Block: queue. A request at the front of the queue will spin first and joins the
        // wait-for graph only if it must sleep (`Self::wait`); any other registers now and
        // searches for a cycle through itself.
        t.stats.waits += 1;
        t.slot.arm();
        head.enqueue(Waiter {
            txn,
            mode: want,
            upgrade,
            home: t.home,
            floor,
            registered: false,
            slot: t.slot.clone(),
            thread: std::thread::current(),
        });
        let at = head.queue.iter().position(|w| w.txn == txn).unwrap_or(0);
        let front = head.is_front(at);
        let spin = if front {
            self.spin_for_front()
        } else {
            Duration::ZERO
        };
        let spins = !spin.is_zero();
        if !spins {
            head.queue[at].registered = true;
        }
        if !spins || (upgrade && head.has_registered()) {
            // Registering; or an upgrade queued ahead of registered waiters, which now
            // wait for it too.
            let mut graph = self.graph();
            refresh_edges(head, &mut graph);
            graph.note_wants(txn, name, want);
            let cycle = if spins {
                None
            } else {
                graph.cycle_through(txn)
            };
            if let Some(cycle) = cycle {
                graph.note_deadlock(&cycle);
                let wakes = self.withdraw(head, txn, &mut graph);
                drop(graph);
                guard.retire_if_unused(index);
                drop(guard);
                wake(wakes);
                t.slot.disarm();
                t.stats.deadlocks += 1;
                return Err(LockError::Deadlock { victim: txn });
            }
        }
        drop(guard);
        let how = Spin { front, spins, spin };
        self.wait(t, name, want, upgrade, how, timer)
    }

    /// [`Self::request`] without the blocking half: `None` (and nothing changed) where
    /// `request` would queue.
    #[inline(always)]
    fn try_request(
        &self,
        t: &mut TxnLocks,
        name: LockName,
        mode: LockMode,
        floor: KeyRank,
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
                    let grant = &mut head.granted[g];
                    grant.floor = grant.floor.min(floor);
                    held
                } else {
                    let want = held.supremum(mode);
                    if !head.compatible_with_others(txn, want) {
                        return None;
                    }
                    head.granted[g].mode = want;
                    head.granted[g].floor = head.granted[g].floor.min(floor);
                    if head.has_registered() {
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
                head.granted.push(Grant {
                    txn,
                    mode,
                    home: t.home,
                    floor,
                });
                drop(guard);
                t.push_held(name, mode, bucket);
                mode
            }
        };
        t.stats.requests += 1;
        t.stats.immediate += 1;
        Some(got)
    }

    /// Whether an insert of a key ranked `inserting` into the gap below `name` may go ahead
    /// with `mode` now, changing nothing (the instant-duration request): as
    /// [`Self::try_request`] would grant it, except that holders guarding only keys above
    /// the inserted one ([`LockHead::admits_insert`]) do not count.
    #[inline(always)]
    fn grantable(
        &self,
        t: &mut TxnLocks,
        name: LockName,
        mode: LockMode,
        inserting: KeyRank,
        timer: &mut Timer,
    ) -> bool {
        let txn = t.txn;
        note_shared(name);
        let bucket = self.table.bucket_index(name);
        let mut guard = self.latch(self.table.bucket_at(bucket), timer);
        let free = match guard.position(name) {
            // Nobody holds or wants it: no head.
            None => true,
            Some(index) => {
                let head = guard.head_at(index);
                match head.grant_of(txn) {
                    Some(g) => {
                        let want = head.granted[g].mode.supremum(mode);
                        head.admits_insert(txn, want, inserting)
                    }
                    None => head.queue.is_empty() && head.admits_insert(txn, mode, inserting),
                }
            }
        };
        drop(guard);
        if free {
            t.stats.requests += 1;
            t.stats.immediate += 1;
        }
        free
    }

    /// How long a waiter at the front of its queue spins before it sleeps (zero: not at
    /// all). It spins while spinning pays — while at least half of the recent spins saw
    /// their grant — and otherwise only as a probe, one front wait in `SPIN_PROBE_EVERY`.
    /// Spins fail when holders do not run (descheduled: more runnable threads than cores,
    /// this process's or others') or run long, and a failed spin takes a core from whoever
    /// could use it, holders included.
    fn spin_for_front(&self) -> Duration {
        if self.config.spin_wait.is_zero() {
            return Duration::ZERO;
        }
        if self.spinning_pays()
            || self
                .spin_probes
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(SPIN_PROBE_EVERY)
        {
            self.spin_limit()
        } else {
            Duration::ZERO
        }
    }

    /// Whether recent spins mostly saw their grant.
    fn spinning_pays(&self) -> bool {
        !self.config.spin_wait.is_zero() && self.spin_score.load(Ordering::Relaxed) >= SPIN_SCORE_ON
    }

    /// How long a spin lasts: as long as nine waits in ten (so that nearly every wait ends
    /// spinning while the holder runs), at least `SPIN_FLOOR_NS` and at most `spin_wait`.
    ///
    /// It was twice the median, which on two idle cores (two threads on one TPC-C
    /// warehouse) sent half of all waits to sleep: a sleep there costs the waker a system
    /// call and the sleeper a wake-up of tens of µs, more than the rest of the wait. With
    /// the 90th percentile, in three interleaved pairs of 4 s runs, the paper mix ran
    /// 56,100-58,600 txn/s against 41,300-43,000 and the full mix 32,200-32,600 against
    /// 26,500-28,000; with a busy loop on each core beside them (6 s runs, noisy), 33,400-
    /// 39,500 against 26,700-44,300 and 18,700-21,000 against 8,000-20,400. Spinning to the
    /// cap every time did better still idle but worse under load on the full mix
    /// (docs/performance.md, "Lock waits").
    fn spin_limit(&self) -> Duration {
        let cap = self.config.spin_wait.as_nanos() as u64;
        let limit = self.wait_ns_p90.load(Ordering::Relaxed);
        Duration::from_nanos(limit.clamp(SPIN_FLOOR_NS.min(cap), cap))
    }

    /// Moves the spin score an eighth of the way towards "all spins succeed" or "all fail".
    fn note_spin(&self, saw_grant: bool) {
        let score = self.spin_score.load(Ordering::Relaxed);
        let next = if saw_grant {
            score + (SPIN_SCORE_ONE - score) / 8
        } else {
            score - score / 8
        };
        self.spin_score.store(next, Ordering::Relaxed);
    }

    /// Whether a grant nudges the sleepers it moves to the front of the queue: only while
    /// spinning pays, since a nudged waiter that did not spin would only go back to sleep.
    fn nudges(&self) -> bool {
        self.spinning_pays()
    }

    /// Moves the 90th-percentile estimate towards a front request's wait of `wait_ns`
    /// (queueing to grant; the wake-up is not part of it): up by `WAIT_STEPS_UP` steps of a
    /// 64th of the estimate if the wait was longer, down by one if shorter. The estimate
    /// settles where the steps balance: one wait in ten longer, nine shorter.
    fn note_wait_length(&self, wait_ns: u64) {
        if self.config.spin_wait.is_zero() {
            return;
        }
        let estimate = self.wait_ns_p90.load(Ordering::Relaxed);
        let step = estimate / 64 + 1;
        let next = if wait_ns > estimate {
            estimate + WAIT_STEPS_UP * step
        } else {
            estimate.saturating_sub(step)
        };
        let ceiling = WAIT_CEILING_SPINS * self.config.spin_wait.as_nanos() as u64;
        let next = next.clamp(WAIT_FLOOR_NS, ceiling.max(WAIT_FLOOR_NS));
        self.wait_ns_p90.store(next, Ordering::Relaxed);
    }

    /// Waits until the queued request of `t` on `name` is granted, its transaction is found
    /// on a cycle, or the wait times out.
    ///
    /// ```text
    ///   spin (front of queue only) ─▶ register in the graph ─▶ sleep ──────────┐
    ///     ▲   ≤ spin_limit()          search for a cycle                      │
    ///     └──────────── nudged: moved to the front of the queue ◀──────────────┤
    ///                  every deadlock_check_interval: search again, time out ◀┘
    /// ```
    ///
    /// `how` says whether the request was at the front of its queue and whether it spins
    /// first (else it registered when it queued).
    fn wait(
        &self,
        t: &mut TxnLocks,
        name: LockName,
        want: LockMode,
        upgrade: bool,
        how: Spin,
        timer: &mut Timer,
    ) -> Result<LockMode, LockError> {
        let txn = t.txn;
        let started = Instant::now();
        let started_ns = self.now_ns();
        let timeout_at = started + self.config.wait_timeout;
        let mut spin = how.spins.then_some(how.spin);
        let mut registered = !how.spins;
        let outcome = loop {
            if let Some(limit) = spin.take() {
                if !limit.is_zero() {
                    let until = (Instant::now() + limit).min(timeout_at);
                    let saw_grant = t.slot.spin_until(until);
                    self.note_spin(saw_grant);
                    if saw_grant {
                        break Ok(WaitEnd::Spinning);
                    }
                }
            }
            if !registered {
                registered = true;
                match self.register(t, name) {
                    Ok(false) => {}
                    Ok(true) => break Ok(WaitEnd::Spinning),
                    Err(e) => break Err(e),
                }
            }
            let check_at = (Instant::now() + self.config.deadlock_check_interval).min(timeout_at);
            let slept = match self.config.io_probe {
                None => t.slot.sleep_until(check_at),
                Some(probe) => self.sleep_sampling(t, check_at, probe),
            };
            match slept {
                Sleep::Granted { slept: true } => break Ok(WaitEnd::Sleeping),
                Sleep::Granted { slept: false } => break Ok(WaitEnd::Spinning),
                Sleep::Nudged => {
                    spin = Some(self.spin_for_front());
                    continue;
                }
                Sleep::Deadline => {}
            }
            // The periodic backstop: search the graph again, or give up at the timeout.
            let mut guard = self.table.latch(name);
            if t.slot.is_granted() {
                break Ok(WaitEnd::Sleeping);
            }
            let timed_out = Instant::now() >= timeout_at;
            let Some(index) = guard.position(name) else {
                unreachable!("{txn} waits on {name}, which has no lock head");
            };
            let head = guard.head_at(index);
            let mut graph = self.graph();
            let cycle = if timed_out {
                None
            } else {
                graph.cycle_through(txn)
            };
            if let Some(cycle) = &cycle {
                graph.note_deadlock(cycle);
            }
            let victim = cycle.is_some();
            if timed_out || victim {
                let wakes = self.withdraw(head, txn, &mut graph);
                drop(graph);
                drop(guard);
                wake(wakes);
                break Err(if victim {
                    LockError::Deadlock { victim: txn }
                } else {
                    LockError::Timeout { txn, name }
                });
            }
        };
        let ended_ns = self.now_ns();
        let wait_ns = ended_ns.saturating_sub(started_ns);
        if timer.start.is_some() {
            timer.logical_ns += started.elapsed().as_nanos() as u64;
        }
        match outcome {
            Ok(ended) => {
                let granted_at_ns = t.slot.granted_at_ns();
                t.slot.disarm();
                t.stats
                    .note_granted(wait_ns, ended_ns.saturating_sub(granted_at_ns), ended);
                if how.front {
                    self.note_wait_length(granted_at_ns.saturating_sub(started_ns));
                }
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
                    LockError::SameThread { .. } => t.stats.same_thread += 1,
                    LockError::Timeout { .. } => t.stats.timeouts += 1,
                }
                Err(e)
            }
        }
    }

    /// Sleeps like `t.slot.sleep_until(until)`, waking every `probe.period` to look along
    /// the wait-for graph from `t` for a transaction inside a physical read, and adding the
    /// slice since the last look to `t.wait_io_ns` when it finds one.
    fn sleep_sampling(&self, t: &mut TxnLocks, until: Instant, probe: IoProbe) -> Sleep {
        let mut last = Instant::now();
        loop {
            let tick = (Instant::now() + probe.period).min(until);
            let slept = t.slot.sleep_until(tick);
            let now = Instant::now();
            if self.chain_in_read(t.txn, probe.in_read) {
                t.wait_io_ns += now.duration_since(last).as_nanos() as u64;
            }
            last = now;
            match slept {
                Sleep::Deadline if now < until => continue,
                other => return other,
            }
        }
    }

    /// Whether a transaction `txn` waits for, directly or through others, is inside a
    /// physical read (`in_read`).
    fn chain_in_read(&self, txn: TxnId, in_read: fn(TxnId) -> bool) -> bool {
        let graph = self.graph();
        let mut seen = vec![txn];
        let mut next = 0;
        while next < seen.len() {
            let at = seen[next];
            next += 1;
            for b in graph.blockers(at) {
                if in_read(b) {
                    return true;
                }
                if !seen.contains(&b) {
                    seen.push(b);
                }
            }
        }
        false
    }

    /// Puts the spinning waiter `t` on `name` into the wait-for graph before it sleeps, and
    /// searches for a cycle through it: `Ok(true)` if it was granted meanwhile (nothing to
    /// register), `Ok(false)` once registered, or the deadlock error with its request
    /// withdrawn.
    #[cold]
    #[inline(never)]
    fn register(&self, t: &TxnLocks, name: LockName) -> Result<bool, LockError> {
        let txn = t.txn;
        let mut guard = self.table.latch(name);
        if t.slot.is_granted() {
            return Ok(true);
        }
        let Some(index) = guard.position(name) else {
            unreachable!("{txn} waits on {name}, which has no lock head");
        };
        let head = guard.head_at(index);
        let Some(at) = head.queue.iter().position(|w| w.txn == txn) else {
            unreachable!("{txn} waits on {name} but is not queued");
        };
        head.queue[at].registered = true;
        let mut graph = self.graph();
        graph.set_edges(txn, head.queue[at].home, head.blockers_of(at));
        graph.note_wants(txn, name, head.queue[at].mode);
        let Some(cycle) = graph.cycle_through(txn) else {
            return Ok(false);
        };
        graph.note_deadlock(&cycle);
        let wakes = self.withdraw(head, txn, &mut graph);
        drop(graph);
        guard.retire_if_unused(index);
        drop(guard);
        wake(wakes);
        Err(LockError::Deadlock { victim: txn })
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
        if head.queue.is_empty() {
            guard.retire_if_unused(index);
            return;
        }
        let wakes = self.grant_after_release(head);
        guard.retire_if_unused(index);
        drop(guard);
        wake(wakes);
    }

    /// Grants the waiters a release unblocked, nudges the new front of the queue, and
    /// refreshes the wait-for edges of the registered waiters; returns the threads to
    /// unpark once the bucket latch is released.
    #[cold]
    #[inline(never)]
    fn grant_after_release(&self, head: &mut LockHead) -> Wakes {
        let now_ns = self.now_ns();
        let nudge = self.nudges();
        let mut wakes = Wakes::new();
        if head.has_registered() {
            let mut graph = self.graph();
            head.grant_waiters(now_ns, nudge, &mut wakes, |g| graph.remove(g));
            refresh_edges(head, &mut graph);
        } else {
            head.grant_waiters(now_ns, nudge, &mut wakes, |_| {});
        }
        wakes
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

/// Counts a request or release on the database's or a table's one lock head (not
/// partitioned): every thread's transactions latch it.
#[inline(always)]
fn note_shared(name: LockName) {
    if matches!(name, LockName::Database | LockName::Table(_)) {
        shared::bump(Place::LockCoarse);
    }
}

/// Recomputes the wait-for edges of every registered request queued on `head`.
fn refresh_edges(head: &LockHead, graph: &mut WaitForGraph) {
    for (i, w) in head.queue.iter().enumerate() {
        if w.registered {
            graph.set_edges(w.txn, w.home, head.blockers_of(i));
        }
    }
}

/// Removes `txn`'s queued request from `head` and the graph, then grants what that unblocked.
/// `now_ns` stamps those grants, `nudge` says whether to nudge the new front, and the
/// threads to unpark go into `wakes`.
fn withdraw_request(
    head: &mut LockHead,
    txn: TxnId,
    graph: &mut WaitForGraph,
    now_ns: u64,
    nudge: bool,
    wakes: &mut Wakes,
) {
    graph.remove(txn);
    head.dequeue(txn);
    head.grant_waiters(now_ns, nudge, wakes, |g| graph.remove(g));
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

    fn spinning_manager(spin_wait: Duration) -> LockManager {
        LockManager::new(LockConfig {
            spin_wait,
            ..LockConfig::default()
        })
    }

    #[test]
    fn spinning_stops_when_spins_fail_and_probes_bring_it_back() {
        let m = spinning_manager(Duration::from_micros(100));
        assert!(m.spinning_pays(), "with no spin seen yet, waiters spin");
        assert_eq!(
            m.spin_for_front(),
            Duration::from_micros(50),
            "half the cap at first"
        );
        for _ in 0..6 {
            m.note_spin(false);
        }
        assert!(
            !m.spinning_pays(),
            "six failed spins in a row turn spinning off"
        );
        assert!(!m.nudges(), "no nudges while spinning is off");
        let spins = (0..64).filter(|_| !m.spin_for_front().is_zero()).count();
        assert_eq!(spins, 64 / SPIN_PROBE_EVERY as usize, "only probes spin");
        m.note_spin(true);
        m.note_spin(true);
        assert!(m.spinning_pays(), "successful probes turn it back on");
        assert!(m.nudges());
    }

    #[test]
    fn a_spin_lasts_as_long_as_nine_waits_in_ten_within_the_cap() {
        let m = spinning_manager(Duration::from_micros(200));
        // Feeds front waits of these lengths (ns); gives the spin bound they leave, in ns.
        let after = |waits: &mut dyn Iterator<Item = u64>| {
            waits.for_each(|w| m.note_wait_length(w));
            m.spin_limit().as_nanos() as u64
        };
        // Waits spread evenly over 1..=100 µs: the 90th percentile is 90 µs, the median 50.
        let limit = after(&mut (0..5000u64).map(|i| (i * 37 % 100 + 1) * 1_000));
        assert!(
            (75_000..=115_000).contains(&limit),
            "90th percentile 90 µs: spin about that, got {limit} ns"
        );
        let limit = after(&mut std::iter::repeat_n(10_000, 2000));
        assert!(
            (9_000..=12_000).contains(&limit),
            "every wait ~10 µs: spin ~10 µs, got {limit} ns"
        );
        let limit = after(&mut std::iter::repeat_n(1_000_000, 200));
        assert_eq!(limit, 200_000, "capped");
        let limit = after(&mut std::iter::repeat_n(0, 2000));
        assert_eq!(limit, SPIN_FLOOR_NS, "floored");
        let off = spinning_manager(Duration::ZERO);
        assert_eq!(off.spin_for_front(), Duration::ZERO);
        assert!(!off.spinning_pays() && !off.nudges());
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
            same_thread: 17,
            wake_histogram: [0; WAKE_BUCKETS],
        };
        for (i, n) in s.wake_histogram.iter_mut().enumerate() {
            *n = 100 + i as u64;
        }
        assert_eq!(LockStats::from_array(s.to_array()), s);
        assert_eq!(s.to_array()[WAKE_NS_MAX_FIELD], 16);
    }
}
