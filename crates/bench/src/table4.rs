//! `glass profile WORKLOAD`: per transaction type, the TPC-E paper's Table 4 (records
//! accessed, row-level and higher-level locks, heap and index pages — total and unique) plus
//! log bytes, latch acquisitions, lock waits and lock-manager time (Lock, physical and logical
//! contention), from the engine's per-transaction profile (`engine::profile`).
//!
//! One thread runs: first a warm-up of the workload's own mix, unprofiled, then for each
//! transaction type the terminal draws until it gets that type, and the committed
//! transaction's profile is added to the type's sums.
//!
//! The warm-up is what makes the figures a database's steady state: a freshly loaded one logs
//! more. TPC-B's history index, for one, starts with leaves that hold several tellers' keys,
//! and an insert ahead of another teller's keys shifts and logs their slots (136 bytes where
//! a grown tree logs 2): a one-thread profile of 1,000 TPC-B transactions right after the load
//! gave 684 log bytes a transaction, after the first 20,000 the rest gave 522
//! (docs/performance.md, "Would a smaller log make the forces shorter?").

use std::fmt::Write as _;
use std::sync::Arc;

use anyhow::Context;
use engine::db::{Database, DbConfig};
use engine::profile::{self, TxnProfile};
use serde::Serialize;
use storage::shared::Place;
use workloads::{Terminal, Workload, WorkloadOptions};

use crate::ladder::measure::measured_txn;
use crate::run::{open_loaded, Status};

/// Draws before a transaction type counts as never drawn.
const MAX_DRAWS: u64 = 100_000;

/// One transaction type's sums.
#[derive(Clone, Debug, Serialize)]
pub struct TypeProfile {
    pub name: String,
    pub txns: u64,
    pub sum: TxnProfile,
    /// Heap allocations (blocks, bytes asked for) made by the transactions, retries and the
    /// terminal's drawing of their inputs included; `None` where the process's allocator
    /// does not count them ([`crate::allocator::Counting`]).
    pub allocations: Option<(u64, u64)>,
}

/// The transactions a profile runs: `warmup` of the workload's mix first, unprofiled, then
/// `txns` of each type.
#[derive(Clone, Copy, Debug)]
pub struct Counts {
    pub warmup: u64,
    pub txns: u64,
}

/// What `glass profile` runs unless told: enough for TPC-B's history index to outgrow its
/// young leaves (see the module's documentation).
pub const DEFAULT_WARMUP: u64 = 5_000;

/// Runs `n` transactions of the terminal's mix, unprofiled, so that what follows is measured
/// on a database past its first growth.
pub fn warm_up(db: &Arc<Database>, terminal: &mut dyn Terminal, n: u64) -> anyhow::Result<()> {
    for _ in 0..n {
        terminal.next();
        measured_txn(db, terminal).context("warm-up transaction")?;
    }
    Ok(())
}

/// Opens `workload` (built with `options`) loaded, as `glass bench` does
/// ([`crate::run::open_loaded`]: in memory, or a directory holding the same load, or an empty
/// one it loads), runs the warm-up, then profiles `counts.txns` transactions of every type it
/// draws.
pub fn run(
    workload: Arc<dyn Workload>,
    options: &WorkloadOptions,
    db_config: &DbConfig,
    set_up_for: usize,
    counts: Counts,
    seed: u64,
) -> anyhow::Result<Vec<TypeProfile>> {
    let mut config = db_config.clone();
    // Sized for `set_up_for` threads (lock partitions and the like); only switches that
    // allow one thread only (latching off) keep it at one.
    config.threads = if config.switches.validate(set_up_for).is_ok() {
        set_up_for.max(1)
    } else {
        1
    };
    config.lock_timing = true;
    let (db, _) = open_loaded(
        "profile",
        workload.name(),
        workload.as_ref(),
        options,
        &config,
        &Status::new(true),
    )?;
    let mut terminal = workload
        .terminal(&db, 0, 1, seed)
        .context("start a terminal")?;
    warm_up(&db, terminal.as_mut(), counts.warmup)?;
    let collecting = profile::collect();
    let mut out = Vec::new();
    for (t, name) in workload.txn_names().iter().enumerate() {
        let mut sum = TxnProfile::default();
        let mut allocations = Some((0u64, 0u64));
        let mut done = 0;
        'txns: for _ in 0..counts.txns {
            let mut draws = 0;
            while terminal.next() != t {
                draws += 1;
                if draws >= MAX_DRAWS {
                    break 'txns;
                }
            }
            let before = crate::allocator::thread_allocations();
            measured_txn(&db, terminal.as_mut()).with_context(|| format!("{name} transaction"))?;
            let after = crate::allocator::thread_allocations();
            allocations = match (allocations, before, after) {
                (Some((n, b)), Some(x), Some(y)) => Some((n + y.0 - x.0, b + y.1 - x.1)),
                _ => None,
            };
            sum += profile::last();
            done += 1;
        }
        if done > 0 {
            out.push(TypeProfile {
                name: name.to_string(),
                txns: done,
                sum,
                allocations,
            });
        }
    }
    drop(collecting);
    drop(terminal);
    db.close().context("close the database")?;
    Ok(out)
}

/// The table: one row per type, every figure per transaction.
pub fn render(types: &[TypeProfile]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<14} {:>6} {:>8} {:>8} {:>8} {:>9} {:>9} {:>8} {:>9} {:>6} {:>8} {:>6} {:>9} {:>9} {:>9} {:>7}",
        "type",
        "txns",
        "records",
        "row-lk",
        "high-lk",
        "heap-pg",
        "index-pg",
        "unique",
        "log-B",
        "pad-B",
        "latches",
        "waits",
        "lock-us",
        "PC-us",
        "LC-us",
        "shared"
    );
    for t in types {
        let n = t.txns.max(1) as f64;
        let p = &t.sum;
        let per = |v: u64| v as f64 / n;
        let _ = writeln!(
            s,
            "{:<14} {:>6} {:>8.1} {:>8.1} {:>8.1} {:>9.1} {:>9.1} {:>8.1} {:>9.0} {:>6.0} {:>8.1} {:>6.2} {:>9.2} {:>9.2} {:>9.2} {:>7.1}",
            t.name,
            t.txns,
            per(p.records),
            per(p.row_locks),
            per(p.higher_locks),
            per(p.heap_pages),
            per(p.index_pages),
            per(p.unique_pages),
            per(p.log_bytes),
            per(p.log_padding),
            per(p.latches),
            per(p.lock_waits),
            per(p.lock_ns) / 1000.0,
            per(p.lock_physical_ns) / 1000.0,
            per(p.lock_logical_ns) / 1000.0,
            per(p.shared.iter().sum()),
        );
    }
    s
}

/// Heap allocations per transaction (blocks and bytes), one row per type; empty where they
/// were not counted.
pub fn render_allocations(types: &[TypeProfile]) -> String {
    let mut s = String::new();
    if types.iter().any(|t| t.allocations.is_none()) {
        return s;
    }
    let _ = writeln!(
        s,
        "heap allocations per transaction\n{:<14} {:>8} {:>9}",
        "type", "blocks", "bytes"
    );
    for t in types {
        let (n, b) = t.allocations.unwrap_or_default();
        let per = t.txns.max(1) as f64;
        let _ = writeln!(
            s,
            "{:<14} {:>8.1} {:>9.0}",
            t.name,
            n as f64 / per,
            b as f64 / per
        );
    }
    s
}

/// The shared writes per transaction by place (`storage::shared`): one column per place
/// that any type reached, one row per type.
pub fn render_shared(types: &[TypeProfile]) -> String {
    let places: Vec<Place> = Place::ALL
        .into_iter()
        .filter(|&p| types.iter().any(|t| t.sum.shared[p as usize] > 0))
        .collect();
    let mut s = String::new();
    if places.is_empty() {
        let _ = writeln!(s, "shared writes per transaction: none");
        return s;
    }
    let _ = write!(s, "shared writes per transaction, by place\n{:<14}", "type");
    for p in &places {
        let _ = write!(s, " {:>w$}", p.name(), w = p.name().len().max(7));
    }
    let _ = writeln!(s);
    for t in types {
        let _ = write!(s, "{:<14}", t.name);
        let n = t.txns.max(1) as f64;
        for p in &places {
            let v = t.sum.shared[*p as usize] as f64 / n;
            let _ = write!(s, " {:>w$.1}", v, w = p.name().len().max(7));
        }
        let _ = writeln!(s);
    }
    s
}
