//! Execution strategies: how a transaction's body is run against the database — once, as
//! conventional two-phase locking does, or in two stages, as Charm proposes for databases
//! larger than memory (Zhou, Roussopoulos and others; `../shared/seeds`, paper 001).
//!
//! ```text
//!   Executor::run(db, type, body)
//!     ├─ conventional.rs  begin ─► body ─► commit                       (one stage)
//!     ├─ tste.rs          fetch stage (FetchTx: no locks, no writes, pins) ─► operate stage
//!     ├─ otste.rs         operate, pinning; on the first read the pool refuses: roll back,
//!     │                   release the locks, keep the pins ─► fetch stage ─► operate stage
//!     └─ htste.rs         per transaction type, from online statistics: conventional, TSTE or
//!                         OTSTE (or the paper's fixed assignment)
//! ```
//!
//! The **fetch stage** ([`fetch::FetchTx`]) runs the body against the tables directly: it
//! cannot lock or log, and changes nothing. The **operate stage** is an ordinary
//! [`Transaction`]. Pages are held pinned from the first stage to the end of the last through
//! the buffer pool's per-thread stage ([`storage::buffer::stage`]), which also refuses OTSTE's
//! first physical read before it is issued and counts each thread's I/O.
//!
//! Every run returns a [`TxnReport`] (stages, conversion, reads per stage, I/O time, lock
//! wait, pages pinned); the executor adds them up per transaction type ([`TypeTotals`]),
//! which is what HTSTE classifies by and what `glass bench` and `glass charm` report.

mod conventional;
pub(crate) mod fetch;
pub mod htste;
mod otste;
#[cfg(test)]
mod tests;
mod tste;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use storage::buffer::stage::{self, IoCounts};

use crate::api::{Tx, TxError, TxResult};
use crate::db::Database;
use crate::txn::Transaction;

pub use htste::{Classifier, Decision, HtsteConfig, TypeCounts};

/// How each transaction is executed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Strategy {
    /// One stage: two-phase locking, reading pages as they are needed (with locks held).
    #[default]
    Conventional,
    /// Every transaction runs a fetch stage, then the operate stage.
    Tste,
    /// Every transaction starts in the operate stage and converts on its first physical read.
    Otste,
    /// Per transaction type, from online statistics (see [`htste`]).
    Htste,
    /// Per transaction type, the paper's own fixed assignment: TPC-C's New-Order and Delivery
    /// as TSTE, the others as OTSTE (any other workload: TSTE).
    HtstePaper,
}

impl Strategy {
    pub const ALL: [Strategy; 5] = [
        Strategy::Conventional,
        Strategy::Tste,
        Strategy::Otste,
        Strategy::Htste,
        Strategy::HtstePaper,
    ];

    /// The name `--execution` takes.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Conventional => "conventional",
            Strategy::Tste => "tste",
            Strategy::Otste => "otste",
            Strategy::Htste => "htste",
            Strategy::HtstePaper => "htste-paper",
        }
    }

    pub fn parse(name: &str) -> Option<Strategy> {
        Strategy::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Whether the strategy needs the buffer pool's stage (pins, refusals).
    fn stages(self) -> bool {
        self != Strategy::Conventional
    }
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How an [`Executor`] runs transactions.
#[derive(Clone, Debug, Default)]
pub struct ExecutionConfig {
    pub strategy: Strategy,
    /// CPU time added to every run of a body (fetch stage and operate stage alike), spun
    /// after it returns and, in the operate stage, with its locks held: the paper's "idle
    /// loop" that stands for a transaction's computation.
    pub spin: Duration,
    pub htste: HtsteConfig,
}

/// What one transaction's execution did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxnReport {
    /// The strategy this instance ran under (HTSTE's choice for its type).
    pub ran: Strategy,
    /// Whether it ran a fetch stage.
    pub two_stage: bool,
    /// OTSTE: whether the operate stage met a read and converted.
    pub converted: bool,
    /// Physical reads in the fetch stage.
    pub fetch_reads: u64,
    /// Physical reads in the operate stage: after a fetch stage, its mis-prefetches.
    pub operate_reads: u64,
    /// Page fixes (data accesses) in the operate stage; counted only with the pool's stage on.
    pub operate_fixes: u64,
    /// Every physical read and write-back of the transaction, with their time.
    pub io: IoCounts,
    /// Every page fix (data access) of the transaction, in every stage.
    pub fixes: u64,
    /// Time the operate stage(s) waited for locks.
    pub lock_wait_ns: u64,
    /// Of `lock_wait_ns`, the time a transaction on the blocking chain was inside a physical
    /// read (with [`crate::DbConfig::attribute_lock_waits`]).
    pub lock_wait_io_ns: u64,
    /// Pages held pinned when it ended.
    pub pinned_pages: u64,
    /// Time in the fetch stage.
    pub fetch_ns: u64,
    /// Whether the fetch stage's body returned an error (a row missing, read without locks;
    /// a rollback the procedure asked for), ending the stage before its end.
    pub fetch_ended_early: bool,
}

impl TxnReport {
    /// Whether the instance needed physical I/O to complete (HTSTE's "needed two stages").
    pub fn needed_io(&self) -> bool {
        self.converted || self.fetch_reads > 0 || (!self.two_stage && self.operate_reads > 0)
    }

    /// Whether the operate stage read from the device after a fetch stage.
    pub fn mis_prefetched(&self) -> bool {
        self.two_stage && self.operate_reads > 0
    }
}

/// Sums of [`TxnReport`]s of one transaction type (committed or not).
#[derive(Default)]
pub struct TypeTotals {
    instances: AtomicU64,
    committed: AtomicU64,
    two_stage: AtomicU64,
    converted: AtomicU64,
    needed_io: AtomicU64,
    mis_prefetched: AtomicU64,
    fetch_reads: AtomicU64,
    operate_reads: AtomicU64,
    operate_fixes: AtomicU64,
    fixes: AtomicU64,
    reads: AtomicU64,
    read_ns: AtomicU64,
    writes: AtomicU64,
    write_ns: AtomicU64,
    lock_wait_ns: AtomicU64,
    lock_wait_io_ns: AtomicU64,
    pinned_pages: AtomicU64,
    fetch_ns: AtomicU64,
    fetch_ended_early: AtomicU64,
    /// Instances by strategy run, in [`Strategy::ALL`] order.
    ran: [AtomicU64; 5],
}

/// A snapshot of [`TypeTotals`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TypeSummary {
    pub instances: u64,
    pub committed: u64,
    pub two_stage: u64,
    pub converted: u64,
    pub needed_io: u64,
    pub mis_prefetched: u64,
    pub fetch_reads: u64,
    pub operate_reads: u64,
    pub operate_fixes: u64,
    pub fixes: u64,
    pub reads: u64,
    pub read_ns: u64,
    pub writes: u64,
    pub write_ns: u64,
    pub lock_wait_ns: u64,
    pub lock_wait_io_ns: u64,
    pub pinned_pages: u64,
    pub fetch_ns: u64,
    pub fetch_ended_early: u64,
    pub ran_conventional: u64,
    pub ran_tste: u64,
    pub ran_otste: u64,
}

impl TypeSummary {
    fn per(&self, total: u64) -> f64 {
        if self.instances == 0 {
            0.0
        } else {
            total as f64 / self.instances as f64
        }
    }

    /// Share of the lock wait during which a transaction on the blocking chain was inside a
    /// physical read, in percent (the Charm paper's Table 1).
    pub fn lock_wait_io_percent(&self) -> f64 {
        if self.lock_wait_ns == 0 {
            0.0
        } else {
            100.0 * self.lock_wait_io_ns as f64 / self.lock_wait_ns as f64
        }
    }

    /// Mean lock wait per instance, in milliseconds.
    pub fn lock_wait_ms(&self) -> f64 {
        self.per(self.lock_wait_ns) / 1e6
    }

    /// Mean I/O time (reads and write-backs) per instance, in milliseconds.
    pub fn io_ms(&self) -> f64 {
        self.per(self.read_ns + self.write_ns) / 1e6
    }

    /// Mean time of one physical read or write, in milliseconds.
    pub fn ms_per_io(&self) -> f64 {
        let n = self.reads + self.writes;
        if n == 0 {
            0.0
        } else {
            (self.read_ns + self.write_ns) as f64 / n as f64 / 1e6
        }
    }

    /// Share of page fixes that found their page in the pool, in percent.
    pub fn hit_percent(&self) -> f64 {
        if self.fixes == 0 {
            100.0
        } else {
            100.0 * (1.0 - self.reads as f64 / self.fixes as f64)
        }
    }

    /// Share of instances that did physical I/O, in percent.
    pub fn io_percent(&self) -> f64 {
        100.0 * self.per(self.needed_io)
    }

    /// Share of instances whose operate stage read after a fetch stage, in percent.
    pub fn mis_prefetch_percent(&self) -> f64 {
        100.0 * self.per(self.mis_prefetched)
    }

    /// Mean memory pinned per instance, in KiB of `page_size`-byte pages.
    pub fn pinned_kib(&self, page_size: usize) -> f64 {
        self.per(self.pinned_pages) * page_size as f64 / 1024.0
    }

    /// The counts HTSTE classifies by.
    pub fn counts(&self) -> TypeCounts {
        TypeCounts {
            instances: self.instances,
            needed_io: self.needed_io,
            operate_fixes_after_fetch: self.operate_fixes,
            operate_reads_after_fetch: self.operate_reads,
        }
    }
}

impl TypeTotals {
    fn add(&self, r: &TxnReport, committed: bool) {
        let add = |a: &AtomicU64, v: u64| {
            if v != 0 {
                a.fetch_add(v, Ordering::Relaxed);
            }
        };
        add(&self.instances, 1);
        add(&self.committed, committed as u64);
        add(&self.two_stage, r.two_stage as u64);
        add(&self.converted, r.converted as u64);
        add(&self.needed_io, r.needed_io() as u64);
        add(&self.mis_prefetched, r.mis_prefetched() as u64);
        add(&self.fetch_reads, r.fetch_reads);
        if r.two_stage {
            // The mis-prefetch ratio's accesses: those of operate stages after a fetch stage.
            add(&self.operate_reads, r.operate_reads);
            add(&self.operate_fixes, r.operate_fixes);
        }
        add(&self.fixes, r.fixes);
        add(&self.reads, r.io.reads);
        add(&self.read_ns, r.io.read_ns);
        add(&self.writes, r.io.writes);
        add(&self.write_ns, r.io.write_ns);
        add(&self.lock_wait_ns, r.lock_wait_ns);
        add(&self.lock_wait_io_ns, r.lock_wait_io_ns);
        add(&self.pinned_pages, r.pinned_pages);
        add(&self.fetch_ns, r.fetch_ns);
        add(&self.fetch_ended_early, r.fetch_ended_early as u64);
        let i = match r.ran {
            Strategy::Conventional => 0,
            Strategy::Tste => 1,
            _ => 2,
        };
        add(&self.ran[i], 1);
    }

    pub fn summary(&self) -> TypeSummary {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        TypeSummary {
            instances: get(&self.instances),
            committed: get(&self.committed),
            two_stage: get(&self.two_stage),
            converted: get(&self.converted),
            needed_io: get(&self.needed_io),
            mis_prefetched: get(&self.mis_prefetched),
            fetch_reads: get(&self.fetch_reads),
            operate_reads: get(&self.operate_reads),
            operate_fixes: get(&self.operate_fixes),
            fixes: get(&self.fixes),
            reads: get(&self.reads),
            read_ns: get(&self.read_ns),
            writes: get(&self.writes),
            write_ns: get(&self.write_ns),
            lock_wait_ns: get(&self.lock_wait_ns),
            lock_wait_io_ns: get(&self.lock_wait_io_ns),
            pinned_pages: get(&self.pinned_pages),
            fetch_ns: get(&self.fetch_ns),
            fetch_ended_early: get(&self.fetch_ended_early),
            ran_conventional: get(&self.ran[0]),
            ran_tste: get(&self.ran[1]),
            ran_otste: get(&self.ran[2]),
        }
    }

    fn reset(&self) {
        for a in [
            &self.instances,
            &self.committed,
            &self.two_stage,
            &self.converted,
            &self.needed_io,
            &self.mis_prefetched,
            &self.fetch_reads,
            &self.operate_reads,
            &self.operate_fixes,
            &self.fixes,
            &self.reads,
            &self.read_ns,
            &self.writes,
            &self.write_ns,
            &self.lock_wait_ns,
            &self.lock_wait_io_ns,
            &self.pinned_pages,
            &self.fetch_ns,
            &self.fetch_ended_early,
        ]
        .into_iter()
        .chain(&self.ran)
        {
            a.store(0, Ordering::Relaxed);
        }
    }
}

/// A transaction's body: run once per stage, with the same input each time.
pub type Body<'a> = dyn FnMut(&mut dyn Tx) -> TxResult<()> + 'a;

/// Runs transactions of a workload's types under one [`Strategy`], keeping per-type totals.
pub struct Executor {
    config: ExecutionConfig,
    names: Vec<String>,
    /// Totals since the last [`Executor::reset_totals`] (what a measured phase reports).
    totals: Vec<TypeTotals>,
    classifier: Classifier,
    /// HTSTE's decisions, in order (each change of a type's class, and the first).
    decisions: Mutex<Vec<Decision>>,
    started: Instant,
}

impl Executor {
    /// An executor for transactions of types `names` (indexes into it) on `db`. A strategy
    /// other than conventional needs the buffer pool (`page-access` on); turns the pool's
    /// stage on for it.
    pub fn new(db: &Database, config: ExecutionConfig, names: &[&str]) -> TxResult<Executor> {
        match db.pool() {
            // Staging on for conventional execution too: it then only counts the fixes (the
            // data accesses a hit rate is computed from).
            Some(pool) => pool.set_staging(true),
            None if config.strategy.stages() => {
                return Err(TxError::Invalid(format!(
                    "--execution {} needs the buffer pool: two-stage execution pins pages, and \
                     with page-access off there are none",
                    config.strategy
                )))
            }
            None => {}
        }
        Ok(Executor {
            classifier: Classifier::new(config.htste.clone(), names, config.strategy),
            config,
            names: names.iter().map(|n| n.to_string()).collect(),
            totals: names.iter().map(|_| TypeTotals::default()).collect(),
            decisions: Mutex::new(Vec::new()),
            started: Instant::now(),
        })
    }

    pub fn config(&self) -> &ExecutionConfig {
        &self.config
    }

    /// The transaction types' names.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Runs `body` as one transaction of type `kind` under the executor's strategy: commits
    /// it, or aborts it and returns the body's error. `counted`: add it to the totals (HTSTE's
    /// statistics take every run).
    pub fn run(
        &self,
        db: &Database,
        kind: usize,
        counted: bool,
        body: &mut Body<'_>,
    ) -> TxResult<TxnReport> {
        let strategy = match self.config.strategy {
            Strategy::Htste | Strategy::HtstePaper => self.classify(kind),
            s => s,
        };
        let mut report = TxnReport {
            ran: strategy,
            ..TxnReport::default()
        };
        let (io, fixes) = (stage::io(), stage::counts().fixes);
        let result = match strategy {
            Strategy::Conventional => conventional::run(self, db, body, &mut report),
            Strategy::Tste => tste::run(self, db, body, &mut report),
            _ => otste::run(self, db, body, &mut report),
        };
        report.io = stage::io().since(&io);
        report.fixes = stage::counts().fixes - fixes;
        if let Some(t) = self.totals.get(kind).filter(|_| counted) {
            t.add(&report, result.is_ok());
        }
        if let Some(c) = self.classifier.totals(kind) {
            c.add(&report, result.is_ok());
        }
        result.map(|()| report)
    }

    /// HTSTE's choice for an instance of `kind`, logging a change of its class.
    fn classify(&self, kind: usize) -> Strategy {
        let (choice, decision) = self.classifier.choose(kind, self.started.elapsed());
        if let Some(d) = decision {
            self.decisions.lock().push(d);
        }
        choice
    }

    /// Per-type totals since the last reset, by type index.
    pub fn totals(&self) -> Vec<TypeSummary> {
        self.totals.iter().map(TypeTotals::summary).collect()
    }

    /// Starts the totals afresh (at the start of a measured phase). HTSTE's own statistics
    /// are kept: they are cumulative, warm-up included.
    pub fn reset_totals(&self) {
        self.totals.iter().for_each(TypeTotals::reset);
    }

    /// HTSTE's decisions so far.
    pub fn decisions(&self) -> Vec<Decision> {
        self.decisions.lock().clone()
    }

    /// Spins for the configured CPU time (after a body ran).
    fn spin(&self) {
        if self.config.spin.is_zero() {
            return;
        }
        let until = Instant::now() + self.config.spin;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
    }
}

/// The operate stage: `body` as a 2PL transaction, committed, or aborted with the body's
/// error. Adds its reads, fixes and lock wait to `report`.
fn operate(
    ex: &Executor,
    db: &Database,
    body: &mut Body<'_>,
    report: &mut TxnReport,
) -> TxResult<()> {
    let (io, fixes) = (stage::io(), stage::counts().fixes);
    let mut txn = db.begin()?;
    stage::set_tag(txn.id());
    let result = body(&mut txn);
    if result.is_ok() {
        ex.spin();
    }
    let result = finish(txn, result, report);
    stage::set_tag(0);
    report.operate_reads += stage::io().since(&io).reads;
    report.operate_fixes += stage::counts().fixes - fixes;
    result
}

/// Commits `txn` after its body returned `result` (or aborts it), adding its lock wait.
fn finish(txn: Transaction<'_>, result: TxResult<()>, report: &mut TxnReport) -> TxResult<()> {
    report.lock_wait_ns += txn.lock_wait_ns();
    report.lock_wait_io_ns += txn.lock_wait_io_ns();
    match result {
        Ok(()) => txn.commit(),
        Err(e) => {
            // The body already failed; an abort error would only hide its cause.
            let _ = txn.abort();
            Err(e)
        }
    }
}

/// The fetch stage: `body` against [`fetch::FetchTx`], its outcome ignored.
fn fetch(ex: &Executor, db: &Database, body: &mut Body<'_>, report: &mut TxnReport) {
    let (started, io) = (Instant::now(), stage::io());
    let mut tx = fetch::FetchTx::new(db);
    match body(&mut tx) {
        Ok(()) => ex.spin(),
        // The stage just ends: the operate stage decides what the error means.
        Err(_) => report.fetch_ended_early = true,
    }
    report.two_stage = true;
    report.fetch_reads += stage::io().since(&io).reads;
    report.fetch_ns += started.elapsed().as_nanos() as u64;
}

/// Holds every page the thread fixes from [`Holding::start`] until [`Holding::release`] (or
/// until dropped, on an early return), then gives them back and stops refusing reads.
struct Holding<'a> {
    db: &'a Database,
}

impl<'a> Holding<'a> {
    fn start(db: &'a Database) -> Holding<'a> {
        stage::hold();
        Holding { db }
    }

    /// Releases every held page; returns how many there were.
    fn release(self) -> u64 {
        let held = stage::held_pages() as u64;
        drop(self);
        held
    }
}

impl Drop for Holding<'_> {
    fn drop(&mut self) {
        stage::refuse_reads(false);
        stage::stop_holding();
        if let Some(pool) = self.db.pool() {
            pool.release_held();
        }
    }
}
