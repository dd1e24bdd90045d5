//! `glass charm`: the experiments of the Charm paper (two-stage transaction execution; paper 001
//! of `shared/seeds/DIGEST.md`) on this machine, from one command, each table beside the
//! paper's numbers.
//!
//! ```text
//!   load       TPC-C at W warehouses, and at 1 for Tables 6 and 8 (once; kept in --db DIR)
//!   calibrate  CPU per transaction: conventional, 1 thread, no device latency, a pool that
//!              holds the database ─► device latency L = 100 × that, rounded up to 100 µs
//!              (or --read-us) ─► pools by hit rate: 95.5, 99.0, 99.7 %, and twice the last
//!   runs       planned first (`plan`), then made one after another, each on a fresh copy:
//!                copy, open ─► pool filled, dirty pages written ─► warm-up, measured ─► check
//!                (machine speed ...................................) (on the device) (machine)
//!              concurrency sweep   Figures 2a 2b 3a 3b, Tables 1 2 3
//!              buffer sweep        Figures 4 5a 5b, Tables 4 5
//!              OTSTE               Table 6         four strategies   Table 7
//!              TSTE's pins         Table 8         HTSTE threshold   its own table
//!   report     charm.md, charm.json, the figures (SVG and PNG)
//! ```
//!
//! Ctrl-C or SIGTERM (with the handler `glass charm` installs: [`crate::driver::interrupt_flag`])
//! ends the run then measuring where it is and starts no other: that run is checked and left
//! out, and the report, its JSON and figures cover the runs made before it, saying so at the
//! top (each table shows "–" for what was not run). Interrupted while loading or calibrating,
//! the command finishes that step (a load is never left half made) and ends with
//! [`InterruptedBeforeARun`], writing nothing.
//!
//! The emulated device (page reads and writes L each, one queue per data device, TPC-C's order
//! lines on the second; the log's writes L on a device of its own) delays the measured runs
//! only ([`Database::set_device`]): opening, filling the pool and checking run at the
//! machine's speed. Each run's own warm-up is on the device, after the pool's dirty pages
//! were written: a warm-up at the machine's speed would leave its measured phase to write
//! back the many pages it dirtied.
//!
//! Every run starts from a fresh copy of the load (a copy costs a fraction of a second), so
//! no run inherits what an earlier one grew or left in the pool, and the order of the runs
//! does not matter. A run is a `glass bench` run made on that copy rather than through
//! [`crate::run::run_bench`], so that the pool sizing's many short runs need no check each,
//! and so that the mean New-Order response time (Figure 3b) can be read from the latency
//! histogram. Every measured run is followed by TPC-C's consistency check; one that fails
//! fails the command, naming the run.
//!
//! Runs are planned before any starts: an experiment asks for runs by their `RunSpec`, and
//! a run asked for twice (the buffer sweep's 99.7 % pool at concurrency 4 is the concurrency
//! sweep's) runs once.
//!
//! Where this differs from the paper, beyond the machine (the report says so too):
//! * The paper ran each transaction as a process of its own; the Charm mix has each terminal
//!   draw its home warehouse and district afresh for every transaction (`workloads::Mix::Charm`),
//!   so that one thread uses every warehouse as four do. (With TPC-C's fixed homes, terminal i
//!   at warehouse i mod W + 1, one and two threads used one and two of five warehouses, whose
//!   pages fit the pool.) The pools are sized at the buffer sweep's concurrency (4), not at 1
//!   thread, so that their hit rates are those of Figure 4's runs.
//! * Runs last seconds, not the paper's 10,000 transactions after 80,000 of warm-up, and each
//!   point is one run (or, with `--rounds N`, the median of N: the whole plan runs N times,
//!   round after round, so that the runs a ratio compares are interleaved), not the mean of
//!   ten.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context};
use engine::db::{Database, DbConfig};
use engine::execution::{ExecutionConfig, HtsteConfig, Strategy, TypeSummary};
use serde_json::{json, Value as Json};
use workloads::{Mix, Workload, WorkloadOptions};

use crate::driver::Stop;
use crate::embedded::EmbeddedExecutor;
use crate::plot::{line_figure, Line, Lines};
use crate::report::{
    consistency_summary, plural, rfc3339_utc, BenchResult, ConditionResult, ExecutionSummary,
    LockSummary, RoundResult,
};
use crate::run::{BenchConfig, Rounds, Status, UsageError};

/// The concurrency of the buffer sweep, Tables 7 and 8 and the threshold sweep (the paper's),
/// and of the runs that size the pools and warm them.
const CONCURRENCY: usize = 4;
/// Table 6's concurrencies.
const TABLE6_CONCURRENCY: [usize; 5] = [2, 3, 4, 5, 6];
const TABLE6_CONCURRENCY_QUICK: [usize; 2] = [2, 4];
/// The hit rates the first three pools are sized for (Figure 4's 128, 256 and 384 MB).
const HIT_TARGETS: [f64; 3] = [95.5, 99.0, 99.7];
/// Index of the 99.7 % pool, the one every experiment but the buffer sweep runs on.
const MAIN_POOL: usize = 2;
/// The paper's idle loop (Table 7) and the latency of its disks, which the loop is scaled by.
const PAPER_SPIN_MS: f64 = 30.0;
const PAPER_READ_MS: f64 = 12.0;
/// HTSTE mis-prefetch thresholds swept (the paper gives none; the engine's default is 10 %).
const THRESHOLDS: [f64; 3] = [0.05, 0.10, 0.20];
/// Each warm-up of a pool runs in chunks this long, at most this many.
const WARM_CHUNK: Duration = Duration::from_millis(250);
const WARM_CHUNKS: u64 = 40;
/// The most threads a run may have.
pub const MAX_THREADS: usize = 64;
/// The most rounds of the plan (`--rounds`).
pub const MAX_ROUNDS: usize = 100;
/// Round r's terminals draw from `seed + r × this + i`: no two rounds share a stream.
const ROUND_SEED_STRIDE: u64 = 1 << 20;
/// Transaction types in the order the tables list them.
const TYPES: [&str; 5] = [
    "new_order",
    "payment",
    "order_status",
    "delivery",
    "stock_level",
];

/// Table 1: % of New-Order's lock wait spent while another transaction did disk I/O, BDB (2PL),
/// by concurrency.
const PAPER_TABLE1: [(usize, f64); 5] = [(2, 93.3), (4, 80.9), (6, 54.1), (8, 34.8), (10, 18.4)];
/// The concurrencies of Tables 2 and 3.
const PAPER_CONCURRENCY: [usize; 7] = [1, 2, 4, 6, 8, 10, 12];
/// Table 2: mean file-system read/write time (ms) by concurrency: BDB, then HTSTE.
const PAPER_TABLE2: [[f64; 7]; 2] = [
    [13.90, 17.75, 17.85, 14.76, 13.45, 12.21, 11.50],
    [13.35, 20.74, 32.22, 26.30, 19.63, 16.86, 13.55],
];
/// Table 3: % of transactions aborted (deadlocks) by concurrency: BDB, then HTSTE.
const PAPER_TABLE3: [[f64; 7]; 2] = [
    [0.0, 0.7, 1.8, 2.8, 3.7, 4.6, 5.4],
    [0.0, 0.1, 0.4, 1.6, 3.2, 4.1, 5.0],
];
/// Figure 4 and Tables 4 and 5: the paper's caches, beside our four pools.
const PAPER_CACHES: [&str; 4] = [
    "128 MB, 95.5 %",
    "256 MB, 99.0 %",
    "384 MB, 99.7 %",
    "512 MB, 99.7 %",
];
/// Table 4: % of instances performing I/O, by type and cache (concurrency 4, BDB).
const PAPER_TABLE4: [[f64; 4]; 5] = [
    [99.8, 75.5, 22.0, 13.3],
    [71.4, 21.1, 3.7, 1.3],
    [82.3, 48.1, 18.1, 9.4],
    [98.7, 97.3, 84.1, 71.7],
    [93.1, 87.5, 62.0, 51.0],
];
/// Table 5: mean file-system read/write time (ms) by cache: BDB, then HTSTE.
const PAPER_TABLE5: [[f64; 4]; 2] = [
    [112.42, 114.14, 34.01, 17.85],
    [146.94, 122.92, 46.81, 32.22],
];
/// Table 6: % of OTSTE transactions doing I/O in the operate stage, concurrency 2..=6: w = 1,
/// then w = 5.
const PAPER_TABLE6: [[f64; 5]; 2] = [[0.9, 2.1, 2.9, 3.8, 4.4], [1.7, 2.1, 2.4, 3.0, 3.3]];
/// Table 7's strategies, in its order (BDB is conventional).
const TABLE7_STRATEGIES: [Strategy; 4] = [
    Strategy::Tste,
    Strategy::Htste,
    Strategy::Otste,
    Strategy::Conventional,
];
/// Table 7: tpmC at concurrency 4 by strategy (TSTE, HTSTE, OTSTE, BDB): 0 ms, then 30 ms of
/// idle loop.
const PAPER_TABLE7_TPMC: [[f64; 4]; 2] = [
    [9662.0, 9686.0, 6869.0, 3648.0],
    [7490.0, 6507.0, 5787.0, 3650.0],
];
/// Table 7: New-Order lock wait (ms), as above.
const PAPER_TABLE7_LOCK_MS: [[f64; 4]; 2] = [[11.8, 11.2, 20.5, 58.9], [14.7, 16.3, 26.2, 56.6]];
/// Table 8: KB pinned per instance, by type (in [`TYPES`] order): w = 1, then w = 5.
const PAPER_TABLE8: [[f64; 5]; 2] = [
    [184.0, 48.0, 64.0, 344.0, 1340.0],
    [370.0, 66.0, 104.0, 534.0, 2305.0],
];
/// The goals: HTSTE over conventional at concurrency 4 (Figure 2a's "+164 %", Table 7's lock
/// wait), and OTSTE's mis-prefetch (Table 6: "under 4.5 %").
const GOAL_TPMC_RATIO: f64 = 2.6;
const GOAL_LOCK_WAIT_RATIO: f64 = 5.0;
const GOAL_MIS_PREFETCH_PERCENT: f64 = 5.0;

/// What `glass charm` runs.
#[derive(Clone, Debug)]
pub struct CharmConfig {
    /// Fewer, shorter runs: Table 6 at concurrency 2 and 4, Table 7 without added CPU, no
    /// threshold sweep, a coarser pool search.
    pub quick: bool,
    /// Where the loaded databases are kept (and reused by a later command); `None`: a
    /// temporary directory, removed at the end.
    pub db: Option<PathBuf>,
    /// Directory for charm.md, charm.json and the figures.
    pub out: PathBuf,
    pub warehouses: u64,
    /// Measured time of each run.
    pub duration: Duration,
    /// Warm-up of each run, not measured.
    pub warmup: Duration,
    /// Device latency of a page read or write and of a log write, in µs; `None`: calibrated.
    pub read_us: Option<u64>,
    /// The concurrency sweep's thread counts, ascending.
    pub threads: Vec<usize>,
    /// Terminal i of every run draws its inputs from `seed + i` (in round r, from `seed +
    /// r × 2^20 + i`).
    pub seed: u64,
    /// How many times the whole plan runs, round after round; each point is the run of median
    /// tpmC among its rounds, and the report gives every round's.
    pub rounds: usize,
    /// Experiments left out (for tests).
    pub skip: Vec<Experiment>,
    /// Threads share one insertion page per table, as Berkeley DB's inserts shared their
    /// B+-trees' right-hand leaves (`--shared-insert-pages`; see
    /// `engine::DbConfig::shared_insert_pages`): under page locking, inserters queue on it.
    pub shared_insert_pages: bool,
}

impl CharmConfig {
    /// The defaults, or those of `--quick`.
    pub fn new(quick: bool) -> CharmConfig {
        let (warehouses, duration, warmup, threads) = if quick {
            (1, 3.0, 1.0, vec![1, 2, 4])
        } else {
            (5, 15.0, 5.0, vec![1, 2, 4, 6, 8, 10, 12])
        };
        CharmConfig {
            quick,
            db: None,
            out: PathBuf::from("charm-results"),
            warehouses,
            duration: Duration::from_secs_f64(duration),
            warmup: Duration::from_secs_f64(warmup),
            read_us: None,
            threads,
            seed: 42,
            rounds: 1,
            skip: Vec::new(),
            shared_insert_pages: false,
        }
    }

    fn validate(&self) -> Result<(), UsageError> {
        let most = workloads::max_scale("tpcc").unwrap_or(u64::MAX);
        if self.warehouses == 0 || self.warehouses > most {
            return Err(UsageError(format!(
                "--warehouses {}: expected 1 to {most}",
                self.warehouses
            )));
        }
        if self.duration.is_zero() {
            return Err(UsageError("--duration must be more than 0 seconds".into()));
        }
        if self.threads.is_empty() {
            return Err(UsageError("--threads-list names no thread count".into()));
        }
        if let Some(&bad) = self.threads.iter().find(|&&t| t == 0 || t > MAX_THREADS) {
            return Err(UsageError(format!(
                "--threads-list: {bad} threads; expected 1 to {MAX_THREADS}"
            )));
        }
        if self.rounds == 0 || self.rounds > MAX_ROUNDS {
            return Err(UsageError(format!(
                "--rounds {}: expected 1 to {MAX_ROUNDS}",
                self.rounds
            )));
        }
        if self.read_us == Some(0) {
            return Err(UsageError("--read-us must be at least 1".into()));
        }
        if self.out.is_file() {
            return Err(UsageError(format!(
                "--out {}: it is a file, not a directory",
                self.out.display()
            )));
        }
        Ok(())
    }

    fn runs(&self, experiment: Experiment) -> bool {
        !self.skip.contains(&experiment)
    }

    /// Warehouse counts of Tables 6 and 8: 1 and W.
    fn table_warehouses(&self) -> Vec<u64> {
        if self.warehouses == 1 {
            vec![1]
        } else {
            vec![1, self.warehouses]
        }
    }

    /// Whether Tables 6 and 8 need the 1-warehouse database besides the W one.
    fn needs_w1(&self) -> bool {
        self.warehouses != 1
            && (self.runs(Experiment::MisPrefetch) || self.runs(Experiment::Pinned))
    }

    fn table6_concurrency(&self) -> &'static [usize] {
        if self.quick {
            &TABLE6_CONCURRENCY_QUICK
        } else {
            &TABLE6_CONCURRENCY
        }
    }
}

/// Parses `--threads-list` (`1,2,4`): sorted, without repeats.
pub fn parse_threads(list: &str) -> Result<Vec<usize>, UsageError> {
    let mut threads = list
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| match s.parse::<usize>() {
            Ok(n) if (1..=MAX_THREADS).contains(&n) => Ok(n),
            _ => Err(UsageError(format!(
                "--threads-list: {s:?} is not a thread count from 1 to {MAX_THREADS}"
            ))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    if threads.is_empty() {
        return Err(UsageError(format!(
            "--threads-list {list:?} names no thread count"
        )));
    }
    threads.sort_unstable();
    threads.dedup();
    Ok(threads)
}

/// One experiment of the command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Experiment {
    /// Figures 2 and 3, Tables 1 to 3.
    Concurrency,
    /// Figures 4 and 5, Tables 4 and 5.
    Buffer,
    /// Table 6: OTSTE's mis-prefetches.
    MisPrefetch,
    /// Table 7: the four strategies, with and without added CPU.
    Strategies,
    /// Table 8: memory pinned per instance.
    Pinned,
    /// HTSTE's mis-prefetch threshold.
    Threshold,
}

impl Experiment {
    pub const ALL: [Experiment; 6] = [
        Experiment::Concurrency,
        Experiment::Buffer,
        Experiment::MisPrefetch,
        Experiment::Strategies,
        Experiment::Pinned,
        Experiment::Threshold,
    ];

    /// The name `--skip` takes.
    pub fn name(self) -> &'static str {
        match self {
            Experiment::Concurrency => "concurrency",
            Experiment::Buffer => "buffer",
            Experiment::MisPrefetch => "table6",
            Experiment::Strategies => "table7",
            Experiment::Pinned => "table8",
            Experiment::Threshold => "threshold",
        }
    }

    /// Parses a comma-separated list of names.
    pub fn parse_list(list: &str) -> Result<Vec<Experiment>, UsageError> {
        list.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                Experiment::ALL
                    .into_iter()
                    .find(|e| e.name() == s)
                    .ok_or_else(|| {
                        let names: Vec<&str> = Experiment::ALL.iter().map(|e| e.name()).collect();
                        UsageError(format!("--skip: {s:?} is not one of {}", names.join(", ")))
                    })
            })
            .collect()
    }
}

/// A buffer pool size and the hit rate it reached (conventional, [`CONCURRENCY`] threads, no
/// device latency).
#[derive(Clone, Copy, Debug, serde::Serialize)]
struct Pool {
    /// The hit rate searched for; `None` for twice the 99.7 % pool (the paper's 512 MB).
    target_percent: Option<f64>,
    mib: usize,
    hit_percent: f64,
}

/// One pool size tried while sizing the pools.
#[derive(Clone, Copy, Debug, serde::Serialize)]
struct Probe {
    warehouses: u64,
    mib: usize,
    hit_percent: f64,
}

/// What the runs are set up with.
#[derive(Clone, Debug, serde::Serialize)]
struct Calibration {
    /// CPU time per transaction, µs: the measured time over the transactions completed.
    cpu_us: f64,
    cpu_txns: u64,
    cpu_seconds: f64,
    cpu_pool_mib: usize,
    /// The device latency L, µs.
    read_us: u64,
    /// Whether L came from `--read-us`.
    read_us_given: bool,
    page_size: usize,
    /// Pages in the W-warehouse database's page file, before the runs.
    db_pages: u64,
    /// The 95.5, 99.0 and 99.7 % pools, then twice the last.
    pools: Vec<Pool>,
    /// The 99.7 % pool of the 1-warehouse database (Tables 6 and 8), when W is not 1.
    pool_w1: Option<Pool>,
    probes: Vec<Probe>,
}

impl Calibration {
    fn latency(&self) -> Duration {
        Duration::from_micros(self.read_us)
    }

    /// Table 7's added CPU: the paper's 30 ms idle loop scaled from its 12 ms disks to L.
    fn spin(&self) -> Duration {
        Duration::from_secs_f64(PAPER_SPIN_MS * self.read_us as f64 / 1e3 / PAPER_READ_MS / 1e3)
    }

    fn main_pool(&self) -> &Pool {
        &self.pools[MAIN_POOL]
    }

    /// The 99.7 % pool of a database of `warehouses` (W or 1).
    fn pool_for(&self, warehouses: u64) -> &Pool {
        match &self.pool_w1 {
            Some(pool) if warehouses == 1 => pool,
            _ => self.main_pool(),
        }
    }
}

/// One measured run: on which database, with how many threads, under which strategy.
#[derive(Clone, Debug, PartialEq)]
struct RunSpec {
    warehouses: u64,
    pool_mib: usize,
    threads: usize,
    strategy: Strategy,
    /// CPU spun after each run of a body (Table 7).
    spin: Duration,
    /// HTSTE's mis-prefetch threshold, a fraction (the default for other strategies).
    mis_prefetch: f64,
}

impl RunSpec {
    fn new(warehouses: u64, pool_mib: usize, threads: usize, strategy: Strategy) -> RunSpec {
        RunSpec {
            warehouses,
            pool_mib,
            threads,
            strategy,
            spin: Duration::ZERO,
            mis_prefetch: HtsteConfig::default().mis_prefetch,
        }
    }

    fn with_spin(self, spin: Duration) -> RunSpec {
        RunSpec { spin, ..self }
    }

    fn with_threshold(self, mis_prefetch: f64) -> RunSpec {
        RunSpec {
            mis_prefetch,
            ..self
        }
    }

    fn execution(&self) -> ExecutionConfig {
        ExecutionConfig {
            strategy: self.strategy,
            spin: self.spin,
            htste: HtsteConfig {
                mis_prefetch: self.mis_prefetch,
                ..HtsteConfig::default()
            },
        }
    }

    fn to_json(&self) -> Json {
        json!({
            "warehouses": self.warehouses,
            "pool_mib": self.pool_mib,
            "threads": self.threads,
            "strategy": self.strategy.name(),
            "spin_ms": self.spin.as_secs_f64() * 1e3,
            "mis_prefetch_threshold": self.mis_prefetch,
        })
    }
}

/// A run the plan asks for, with what it is for.
struct Planned {
    spec: RunSpec,
    label: String,
}

/// A finished run.
struct Run {
    spec: RunSpec,
    label: String,
    /// Which round of the plan it belongs to, from 0.
    round: usize,
    result: BenchResult,
    /// Mean response time of a New-Order (commit or rollback), ms.
    new_order_mean_ms: f64,
    /// The device latency L, µs.
    read_us: u64,
    /// Seconds to copy and open the load, and the refill of its pool (seconds, page reads).
    open_s: f64,
    refill_s: f64,
    refill_reads: u64,
}

impl Run {
    fn tpmc(&self) -> f64 {
        self.result.new_order_tpm.unwrap_or(0.0)
    }

    fn types(&self) -> &[(String, TypeSummary)] {
        self.result
            .execution
            .as_ref()
            .map_or(&[], |e| e.by_type.as_slice())
    }

    fn of_type(&self, name: &str) -> TypeSummary {
        self.types()
            .iter()
            .find(|(n, _)| n == name)
            .map_or_else(TypeSummary::default, |(_, t)| *t)
    }

    fn new_order(&self) -> TypeSummary {
        self.of_type("new_order")
    }

    /// Every type's totals added up.
    fn all(&self) -> TypeSummary {
        sum(self.types())
    }

    /// Deadlock aborts (retried) over commits and aborts, in percent.
    fn abort_percent(&self) -> f64 {
        let r = &self.result;
        percent(r.aborts as f64, (r.commits + r.aborts) as f64)
    }

    /// The device time the run's page I/Os asked for (each L) over its measured time, in
    /// percent: 100 keeps one device busy (the order lines have a second).
    fn device_load_percent(&self) -> f64 {
        let all = self.all();
        let busy_s = (all.reads + all.writes) as f64 * self.read_us as f64 / 1e6;
        percent(busy_s, self.result.duration_s)
    }

    /// Page reads per transaction, every type: where the device is busy, throughput is about
    /// one over this times L, so a run that starts from a pool holding less of what it needs
    /// shows it here first.
    fn reads_per_txn(&self) -> f64 {
        let all = self.all();
        all.reads as f64 / self.result.txn_count.max(1) as f64
    }

    /// New-Order's lock wait over its mean response time, in percent (Figure 3b).
    fn lock_share_percent(&self) -> f64 {
        percent(self.new_order().lock_wait_ms(), self.new_order_mean_ms)
    }

    fn page_size(&self) -> usize {
        self.result.execution.as_ref().map_or(0, |e| e.page_size)
    }

    /// Each type's class at the end of the run (HTSTE's last decision for it).
    fn classes(&self) -> Vec<(String, &'static str)> {
        let decisions = self
            .result
            .execution
            .as_ref()
            .map_or(&[][..], |e| e.decisions.as_slice());
        TYPES
            .iter()
            .filter_map(|name| {
                decisions
                    .iter()
                    .rev()
                    .find(|d| d.txn_type == *name)
                    .map(|d| (name.to_string(), d.to))
            })
            .collect()
    }
}

/// The finished runs, looked up by what they ran.
struct Runs(Vec<Run>);

impl Runs {
    /// The run of `spec` of median tpmC among its rounds (of two middle ones, the lower): the
    /// point every table shows.
    fn get(&self, spec: &RunSpec) -> Option<&Run> {
        let mut rounds = self.rounds_of(spec);
        rounds.sort_by(|a, b| a.tpmc().total_cmp(&b.tpmc()));
        rounds.get(rounds.len().saturating_sub(1) / 2).copied()
    }

    /// Every round's run of `spec`, in round order.
    fn rounds_of(&self, spec: &RunSpec) -> Vec<&Run> {
        self.0.iter().filter(|r| r.spec == *spec).collect()
    }

    /// The specs run, each once, in the order they first ran.
    fn specs(&self) -> Vec<(&RunSpec, &str)> {
        let mut specs: Vec<(&RunSpec, &str)> = Vec::new();
        for r in &self.0 {
            if !specs.iter().any(|(s, _)| **s == r.spec) {
                specs.push((&r.spec, &r.label));
            }
        }
        specs
    }
}

/// The median (of two middle values, their mean), least and most of `values`; `None` if
/// there are none.
fn median_range(values: &[f64]) -> Option<(f64, f64, f64)> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = match n {
        0 => return None,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    };
    Some((median, v[0], v[n - 1]))
}

/// `a / b` in percent; 0 when `b` is 0.
fn percent(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        100.0 * a / b
    } else {
        0.0
    }
}

/// The totals of several types added up (the fields the tables read).
fn sum(types: &[(String, TypeSummary)]) -> TypeSummary {
    let mut all = TypeSummary::default();
    for (_, t) in types {
        all.instances += t.instances;
        all.committed += t.committed;
        all.needed_io += t.needed_io;
        all.mis_prefetched += t.mis_prefetched;
        all.fixes += t.fixes;
        all.reads += t.reads;
        all.read_ns += t.read_ns;
        all.writes += t.writes;
        all.write_ns += t.write_ns;
        all.lock_wait_ns += t.lock_wait_ns;
        all.lock_wait_io_ns += t.lock_wait_io_ns;
        all.pinned_pages += t.pinned_pages;
    }
    all
}

fn tpcc_options(warehouses: u64) -> WorkloadOptions {
    WorkloadOptions {
        scale: warehouses,
        mix: Mix::Charm,
        ..WorkloadOptions::default()
    }
}

/// How a session's database is set up.
#[derive(Clone, Copy, Debug)]
struct Setup {
    warehouses: u64,
    pool_mib: usize,
    /// The emulated device's latency; `None`: none.
    latency: Option<Duration>,
    /// The threads of the run on it (the database is set up for them).
    threads: usize,
    /// Threads share one insertion page per table ([`CharmConfig::shared_insert_pages`]).
    shared_insert_pages: bool,
}

impl Setup {
    fn describe(&self) -> String {
        format!("w={}, {} MiB pool", self.warehouses, self.pool_mib)
    }
}

/// An open copy of a load: a measured run, or a probe of the calibration.
struct Session {
    setup: Setup,
    options: WorkloadOptions,
    workload: Arc<dyn Workload>,
    db_config: DbConfig,
    db: Arc<Database>,
    open_s: f64,
    /// Time and page reads of the pool's refills (see [`Session::warm`]).
    warm_s: f64,
    warm_reads: u64,
}

/// What one driven run measured.
struct Measured {
    result: BenchResult,
    new_order_mean_ms: f64,
}

/// The embedded executor without the emulated device: it never turns the device on, so that
/// a pool's refill, counted as measured (to read how many pages it read), runs at the
/// machine's speed.
struct Unhurried<'a>(&'a EmbeddedExecutor);

impl crate::driver::Executor for Unhurried<'_> {
    fn execute(
        &self,
        attempt: crate::driver::Attempt,
        terminal: &mut dyn workloads::Terminal,
    ) -> engine::TxResult<()> {
        let Some(strategies) = &self.0.strategies else {
            return self.0.execute(attempt, terminal);
        };
        let mut body = |tx: &mut dyn engine::Tx| terminal.run(tx);
        strategies
            .run(&self.0.db, attempt.txn, attempt.measured, &mut body)
            .map(drop)
    }
}

impl Session {
    /// Copies the load in `base` into `dir` (replacing what is there) and opens the copy as
    /// `setup` says: every run starts from the same database, whatever ran before it.
    fn open(base: &Path, dir: &Path, setup: Setup) -> anyhow::Result<Session> {
        let started = Instant::now();
        copy_database(base, dir)?;
        let options = tpcc_options(setup.warehouses);
        let workload = crate::run::build_workload("tpcc", &options)?;
        let mut db_config = DbConfig {
            path: Some(dir.to_path_buf()),
            pool_mib: setup.pool_mib,
            // The paper's Berkeley DB locks pages, and logs asynchronously.
            page_locking: true,
            // Nor had it degree 2 (read committed): Stock-Level's page locks stay to its
            // commit, as the paper's did, though the workload asks for level 1.
            read_committed: false,
            shared_insert_pages: setup.shared_insert_pages,
            durable: false,
            threads: setup.threads,
            // No fuzzy checkpoint in a measured phase (its page writes would queue on the
            // device): each run starts with a sharp one, at the machine's speed.
            checkpoint_bytes: u64::MAX,
            attribute_lock_waits: true,
            ..DbConfig::default()
        }
        // Nor a guard against torn pages, which Berkeley DB did not have: a doublewrite
        // file's writes, or images in the log, would be I/O the paper's runs did not do. Its
        // log, not forced at commit, is still synced before a page is written back (BDB's
        // `memp` flushes the log to a page's LSN first): that stays.
        .without_torn_page_guard();
        if let Some(latency) = setup.latency {
            db_config.device = storage::DeviceModel {
                read_delay: latency,
                write_delay: latency,
                mode: storage::QueueMode::SingleQueue,
            };
            db_config.log_device = latency;
        }
        let (db, _) = crate::run::open_loaded(
            "charm",
            "tpcc",
            workload.as_ref(),
            &options,
            &db_config,
            &Status::new(true),
        )
        .with_context(|| format!("open the database {}", setup.describe()))?;
        Ok(Session {
            setup,
            options,
            workload,
            db_config,
            db,
            open_s: started.elapsed().as_secs_f64(),
            warm_s: 0.0,
            warm_reads: 0,
        })
    }

    fn page_size(&self) -> usize {
        self.db.pool().map_or(8192, |p| p.page_size())
    }

    fn frames(&self) -> u64 {
        ((self.setup.pool_mib << 20) / self.page_size().max(1)) as u64
    }

    /// Fills the pool with the workload's pages after the open: conventional transactions on
    /// [`CONCURRENCY`] threads (at most the run's) at the machine's speed, in chunks of
    /// [`WARM_CHUNK`], until [`warm_enough`] says so, for at most [`WARM_CHUNKS`] chunks.
    fn warm(&mut self, seed: u64) -> anyhow::Result<()> {
        let started = Instant::now();
        let threads = CONCURRENCY.min(self.setup.threads);
        let goal = self
            .frames()
            .min(self.db.pool().map_or(0, |p| p.page_count()));
        let mut reads = 0;
        for round in 0..WARM_CHUNKS {
            let seed = seed.wrapping_add(round.wrapping_mul(1000));
            let m = self.drive(
                threads,
                Duration::ZERO,
                WARM_CHUNK,
                seed,
                false,
                Default::default(),
            )?;
            let chunk_reads =
                sum(m.result.execution.as_ref().map_or(&[][..], |e| &e.by_type)).reads;
            reads += chunk_reads;
            if warm_enough(goal, reads, chunk_reads) {
                break;
            }
        }
        self.warm_s += started.elapsed().as_secs_f64();
        self.warm_reads += reads;
        Ok(())
    }

    /// A measured run: the pool's dirty pages written at the machine's speed, then
    /// `threads` terminals under `execution` for `warmup` and `duration` (measured), both on
    /// the emulated device. (A warm-up at the machine's speed would leave the measured phase
    /// to write back the pages it dirtied, many times what as many seconds on the device
    /// dirty.)
    fn measure(
        &self,
        threads: usize,
        warmup: Duration,
        duration: Duration,
        seed: u64,
        execution: ExecutionConfig,
    ) -> anyhow::Result<Measured> {
        self.db.set_device(false);
        self.db
            .checkpoint()
            .context("write the pool's dirty pages before the run")?;
        self.drive(threads, warmup, duration, seed, true, execution)
    }

    /// Drives `threads` terminals for `warmup`, then `duration` measured, under `execution`,
    /// with the emulated device (if any) on throughout when `on_device`, else off.
    fn drive(
        &self,
        threads: usize,
        warmup: Duration,
        duration: Duration,
        seed: u64,
        on_device: bool,
        execution: ExecutionConfig,
    ) -> anyhow::Result<Measured> {
        let txn_names = self.workload.txn_names();
        let strategy = execution.strategy;
        let strategies = engine::execution::Executor::new(&self.db, execution.clone(), txn_names)
            .map_err(|e| anyhow::anyhow!("start the {strategy} executor: {e}"))?;
        let embedded = EmbeddedExecutor::with(self.db.clone(), Some(strategies));
        let unhurried = Unhurried(&embedded);
        let executor: &dyn crate::driver::Executor = if on_device { &embedded } else { &unhurried };
        let terminals = (0..threads)
            .map(|i| {
                self.workload
                    .terminal(&self.db, i, threads, seed.wrapping_add(i as u64))
                    .with_context(|| format!("start terminal {i}"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let mut config = BenchConfig::new("tpcc");
        config.options = self.options.clone();
        config.threads = threads;
        config.stop = Stop::Duration(duration);
        config.warmup = warmup;
        config.db = self.db_config.clone();
        config.seed = seed;
        config.quiet = true;
        config.execution = Some(execution);
        let timestamp = rfc3339_utc(SystemTime::now());
        let locks_before = self.db.lock_manager().map(|m| m.stats());
        self.db.set_device(on_device);
        let driven = crate::run::run_driver(
            &config,
            "",
            terminals,
            executor,
            txn_names,
            &Status::new(true),
        );
        self.db.set_device(false);
        let outcome = driven?;
        let locks = self
            .db
            .lock_manager()
            .zip(locks_before)
            .map(|(m, before)| LockSummary::between(&before, &m.stats()));
        let execution = embedded
            .strategies
            .as_ref()
            .map(|s| ExecutionSummary::of(s, self.page_size()));
        let new_order_mean_ms = txn_names
            .iter()
            .position(|n| *n == "new_order")
            .map_or(0.0, |i| outcome.stats.by_type[i].latency_us.mean() / 1e3);
        let rounds = Rounds {
            each: vec![RoundResult::of(&outcome.stats.overall(), outcome.elapsed)],
            merged: outcome,
        };
        let result = crate::run::bench_result(
            &config,
            &self.db_config,
            timestamp,
            None,
            txn_names,
            &rounds,
            &[],
        )?
        .with_locks(locks, self.db.last_deadlock())
        .with_execution(execution);
        Ok(Measured {
            result,
            new_order_mean_ms,
        })
    }

    /// TPC-C's consistency conditions, at the machine's speed: "ok" or what failed.
    fn check(&self) -> anyhow::Result<(String, Vec<workloads::Condition>)> {
        self.db.set_device(false);
        let conditions = self
            .workload
            .check(&self.db)
            .context("check TPC-C's consistency")?;
        Ok((consistency_summary(&conditions), conditions))
    }

    /// Closes the database (its dirty pages written at the machine's speed).
    fn close(self) -> anyhow::Result<()> {
        self.db.set_device(false);
        self.db
            .close()
            .with_context(|| format!("close the database {}", self.setup.describe()))
    }
}

/// Copies the files of a closed database directory into `to`, replacing it.
fn copy_database(from: &Path, to: &Path) -> anyhow::Result<()> {
    if to.exists() {
        std::fs::remove_dir_all(to).with_context(|| format!("remove {}", to.display()))?;
    }
    copy_dir(from, to)
}

fn copy_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("create {}", to.display()))?;
    let entries = std::fs::read_dir(from).with_context(|| format!("list {}", from.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("list {}", from.display()))?;
        let target = to.join(entry.file_name());
        let kind = entry
            .file_type()
            .with_context(|| format!("inspect {}", entry.path().display()))?;
        if kind.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target).with_context(|| {
                format!("copy {} to {}", entry.path().display(), target.display())
            })?;
        }
    }
    Ok(())
}

/// Loads TPC-C at `warehouses` into `dir` unless it already holds that load.
fn ensure_loaded(dir: &Path, warehouses: u64) -> anyhow::Result<()> {
    let options = tpcc_options(warehouses);
    match crate::run::inspect_dir(dir)? {
        Some(manifest) => {
            if let Some(why) = manifest.mismatch("tpcc", &options) {
                bail!(UsageError(format!(
                    "cannot use {} for {warehouses} warehouses: {why}",
                    dir.display()
                )));
            }
            say(format_args!(
                "using the TPC-C database in {} ({warehouses} warehouses)",
                dir.display()
            ));
        }
        None => {
            let db = DbConfig {
                path: Some(dir.to_path_buf()),
                pool_mib: charm_pool_mib(&options),
                ..DbConfig::default()
            };
            crate::run::run_load("tpcc", &options, &db, false)?;
        }
    }
    Ok(())
}

/// Where the command keeps its databases.
struct Dirs {
    /// The loads, one directory per warehouse count, kept for the next command.
    root: PathBuf,
    /// The copy of a load each run changes (a fresh one for every run); removed at the end.
    work: PathBuf,
}

impl Dirs {
    fn base(&self, warehouses: u64) -> PathBuf {
        self.root.join(format!("tpcc-{warehouses}w"))
    }

    fn copy(&self, warehouses: u64) -> PathBuf {
        self.work.join(format!("tpcc-{warehouses}w"))
    }
}

/// When the command started, for the status lines' clock.
static STARTED: OnceLock<Instant> = OnceLock::new();

/// Prints a status line on stderr, after the time since the command started.
fn say(line: std::fmt::Arguments<'_>) {
    let secs = STARTED.get().map_or(0, |s| s.elapsed().as_secs());
    eprintln!("charm {}:{:02} {line}", secs / 60, secs % 60);
}

/// Whether a pool's warm-up ([`Session::warm`]) has done its work: `goal` is what the pool can
/// hold of the data (its frames, or the database's pages where it holds them all), `reads` the
/// pages read so far and `chunk` the last chunk's. Done once the pool has turned over (as many
/// reads as the goal), or once a chunk reads less than 1 % of the goal: what is still cold is
/// touched too rarely to matter.
///
/// Not 1 % of the frames: a pool larger than the database stopped early by that rule, with
/// pages the transactions go on to read still cold, and measured a lower hit rate than a pool
/// the data fills (December 7: 1,376 MiB hit 99.64 % where 558 MiB hit 99.77 %, and the
/// calibration took it for the 99.7 % pool).
fn warm_enough(goal: u64, reads: u64, chunk: u64) -> bool {
    reads >= goal || chunk * 100 < goal
}

/// How long the calibration's measured runs are: short, at most the runs' own.
fn probe_duration(config: &CharmConfig) -> Duration {
    (config.duration / 5)
        .max(Duration::from_millis(500))
        .min(Duration::from_secs(2))
        .min(config.duration)
}

/// A pool that holds a TPC-C database of `options` and what a calibration run adds to it:
/// the load's, the CPU calibration's, and the largest the pool search tries.
fn charm_pool_mib(options: &WorkloadOptions) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let run = crate::capacity::RunLength::Open { threads: 1 };
    crate::capacity::pool_mib_for("tpcc", options, run, cores)
}

/// Measures the CPU per transaction, sets the device latency, and sizes the pools.
fn calibrate(config: &CharmConfig, dirs: &Dirs) -> anyhow::Result<Calibration> {
    let w = config.warehouses;
    let probe = probe_duration(config);
    let cpu_pool_mib = charm_pool_mib(&tpcc_options(w));
    say(format_args!(
        "calibrating the CPU per transaction (conventional, 1 thread, no device latency, \
         {cpu_pool_mib} MiB pool)..."
    ));
    let setup = Setup {
        warehouses: w,
        pool_mib: cpu_pool_mib,
        latency: None,
        threads: 1,
        shared_insert_pages: config.shared_insert_pages,
    };
    let mut session = Session::open(&dirs.base(w), &dirs.copy(w), setup)?;
    session.warm(config.seed)?;
    let cpu = session.measure(1, Duration::ZERO, probe, config.seed, Default::default())?;
    let page_size = session.page_size();
    let db_pages = session.db.pool().map_or(0, |p| p.page_count());
    session.close()?;
    let cpu_txns = cpu.result.txn_count;
    if cpu_txns == 0 {
        bail!("the calibration run completed no transaction");
    }
    let cpu_seconds = cpu.result.duration_s;
    let cpu_us = cpu_seconds * 1e6 / cpu_txns as f64;
    let (read_us, read_us_given) = match config.read_us {
        Some(us) => (us, true),
        // 100 × the CPU, rounded up to a multiple of 100 µs.
        None => ((cpu_us.ceil() as u64).max(1) * 100, false),
    };
    say(format_args!(
        "{cpu_us:.1} µs of CPU per transaction; device latency {read_us} µs{}",
        if read_us_given {
            " (--read-us)"
        } else {
            " (100 × the CPU, rounded up to 100 µs)"
        }
    ));

    let tolerance = if config.quick { 1.5 } else { 1.1 };
    let mut probes = Vec::new();
    let mut pools = Vec::new();
    for target in HIT_TARGETS {
        let search = Search {
            warehouses: w,
            target,
            largest: cpu_pool_mib,
            tolerance,
        };
        pools.push(size_pool(config, dirs, &search, &mut probes)?);
    }
    let double = pools[MAIN_POOL].mib * 2;
    let hit_percent = probe_pool(config, dirs, w, double, &mut probes)?;
    pools.push(Pool {
        target_percent: None,
        mib: double,
        hit_percent,
    });
    let pool_w1 = if config.needs_w1() {
        let search = Search {
            warehouses: 1,
            target: HIT_TARGETS[MAIN_POOL],
            largest: charm_pool_mib(&tpcc_options(1)),
            tolerance,
        };
        Some(size_pool(config, dirs, &search, &mut probes)?)
    } else {
        None
    };
    Ok(Calibration {
        cpu_us,
        cpu_txns,
        cpu_seconds,
        cpu_pool_mib,
        read_us,
        read_us_given,
        page_size,
        db_pages,
        pools,
        pool_w1,
        probes,
    })
}

/// The hit rate of a `mib` pool on the `warehouses` database: conventional, [`CONCURRENCY`]
/// threads, no device latency, after the pool has turned over. Remembered in `probes`.
fn probe_pool(
    config: &CharmConfig,
    dirs: &Dirs,
    warehouses: u64,
    mib: usize,
    probes: &mut Vec<Probe>,
) -> anyhow::Result<f64> {
    if let Some(p) = probes
        .iter()
        .find(|p| p.warehouses == warehouses && p.mib == mib)
    {
        return Ok(p.hit_percent);
    }
    let probe = probe_duration(config);
    let setup = Setup {
        warehouses,
        pool_mib: mib,
        latency: None,
        threads: CONCURRENCY,
        shared_insert_pages: config.shared_insert_pages,
    };
    let mut session = Session::open(&dirs.base(warehouses), &dirs.copy(warehouses), setup)?;
    session.warm(config.seed)?;
    let m = session.measure(
        CONCURRENCY,
        Duration::ZERO,
        probe,
        config.seed,
        Default::default(),
    )?;
    session.close()?;
    let hit_percent =
        sum(m.result.execution.as_ref().map_or(&[][..], |e| &e.by_type)).hit_percent();
    say(format_args!(
        "a {mib} MiB pool (w={warehouses}) hits {hit_percent:.2} %"
    ));
    probes.push(Probe {
        warehouses,
        mib,
        hit_percent,
    });
    Ok(hit_percent)
}

/// What [`size_pool`] looks for.
struct Search {
    warehouses: u64,
    /// The hit rate, in percent.
    target: f64,
    /// The largest pool tried, in MiB (the smallest is 1).
    largest: usize,
    /// The bisection stops when its bracket's ends are within this ratio.
    tolerance: f64,
}

/// The pool whose hit rate is closest to the target: a bisection on a log scale between 1 MiB
/// and the largest, then the closest of every probe of that database.
fn size_pool(
    config: &CharmConfig,
    dirs: &Dirs,
    search: &Search,
    probes: &mut Vec<Probe>,
) -> anyhow::Result<Pool> {
    let (w, target) = (search.warehouses, search.target);
    say(format_args!(
        "sizing the pool for a {target} % hit rate (w={w})..."
    ));
    let (mut lo, mut hi) = (1usize, search.largest.max(2));
    if probe_pool(config, dirs, w, hi, probes)? >= target
        && probe_pool(config, dirs, w, lo, probes)? < target
    {
        // Start from the bracket earlier targets' probes already give.
        for p in probes.iter().filter(|p| p.warehouses == w) {
            if p.hit_percent < target {
                lo = lo.max(p.mib);
            } else {
                hi = hi.min(p.mib);
            }
        }
        while hi > lo + 1 && hi as f64 / lo as f64 > search.tolerance {
            let mid = ((lo as f64 * hi as f64).sqrt().round() as usize).clamp(lo + 1, hi - 1);
            if probe_pool(config, dirs, w, mid, probes)? >= target {
                hi = mid;
            } else {
                lo = mid;
            }
        }
    }
    let closest = probes
        .iter()
        .filter(|p| p.warehouses == w)
        .min_by(|a, b| {
            (a.hit_percent - target)
                .abs()
                .total_cmp(&(b.hit_percent - target).abs())
                .then(a.mib.cmp(&b.mib))
        })
        .copied()
        .ok_or_else(|| anyhow::anyhow!("no pool was probed"))?;
    Ok(Pool {
        target_percent: Some(target),
        mib: closest.mib,
        hit_percent: closest.hit_percent,
    })
}

const SWEPT: [Strategy; 2] = [Strategy::Conventional, Strategy::Htste];

/// Table 7's added CPU: none, and (without --quick) the paper's idle loop scaled to L.
fn table7_spins(config: &CharmConfig, cal: &Calibration) -> Vec<Duration> {
    if config.quick {
        vec![Duration::ZERO]
    } else {
        vec![Duration::ZERO, cal.spin()]
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The runs an experiment needs, each with what it is for.
fn specs(
    experiment: Experiment,
    config: &CharmConfig,
    cal: &Calibration,
) -> Vec<(RunSpec, String)> {
    let w = config.warehouses;
    let main = cal.main_pool().mib;
    match experiment {
        Experiment::Concurrency => config
            .threads
            .iter()
            .flat_map(|&t| {
                SWEPT.map(|s| {
                    let label = format!("concurrency sweep: {s}, {t} thread{}", plural(t));
                    (RunSpec::new(w, main, t, s), label)
                })
            })
            .collect(),
        Experiment::Buffer => cal
            .pools
            .iter()
            .flat_map(|p| {
                SWEPT.map(|s| {
                    let label = format!(
                        "buffer sweep: {s}, {CONCURRENCY} threads, {} MiB pool",
                        p.mib
                    );
                    (RunSpec::new(w, p.mib, CONCURRENCY, s), label)
                })
            })
            .collect(),
        Experiment::MisPrefetch => config
            .table_warehouses()
            .into_iter()
            .flat_map(|w| {
                config.table6_concurrency().iter().map(move |&c| {
                    let spec = RunSpec::new(w, cal.pool_for(w).mib, c, Strategy::Otste);
                    (spec, format!("Table 6: otste, {c} threads, w={w}"))
                })
            })
            .collect(),
        Experiment::Strategies => table7_spins(config, cal)
            .into_iter()
            .flat_map(|spin| {
                TABLE7_STRATEGIES.map(|s| {
                    let spec = RunSpec::new(w, main, CONCURRENCY, s).with_spin(spin);
                    (
                        spec,
                        format!(
                            "Table 7: {s}, {CONCURRENCY} threads, spin {:.1} ms",
                            ms(spin)
                        ),
                    )
                })
            })
            .collect(),
        Experiment::Pinned => config
            .table_warehouses()
            .into_iter()
            .map(|w| {
                let spec = RunSpec::new(w, cal.pool_for(w).mib, CONCURRENCY, Strategy::Tste);
                (spec, format!("Table 8: tste, {CONCURRENCY} threads, w={w}"))
            })
            .collect(),
        Experiment::Threshold if config.quick => Vec::new(),
        Experiment::Threshold => THRESHOLDS
            .iter()
            .map(|&t| {
                let spec = RunSpec::new(w, main, CONCURRENCY, Strategy::Htste).with_threshold(t);
                (
                    spec,
                    format!(
                        "threshold sweep: htste, {CONCURRENCY} threads, {:.0} %",
                        t * 100.0
                    ),
                )
            })
            .collect(),
    }
}

/// Every run of the experiments not skipped, in order, each once.
fn plan(config: &CharmConfig, cal: &Calibration) -> Vec<Planned> {
    let mut planned: Vec<Planned> = Vec::new();
    for experiment in Experiment::ALL.into_iter().filter(|&e| config.runs(e)) {
        for (spec, label) in specs(experiment, config, cal) {
            if !planned.iter().any(|p| p.spec == spec) {
                planned.push(Planned { spec, label });
            }
        }
    }
    planned
}

/// Makes the planned runs in order, each on a fresh copy of its load and followed by TPC-C's
/// consistency check.
fn execute(
    config: &CharmConfig,
    dirs: &Dirs,
    cal: &Calibration,
    plan: &[Planned],
) -> anyhow::Result<(Runs, Option<Interruption>)> {
    let mut runs = Vec::new();
    let total = plan.len() * config.rounds;
    let rounds = (0..config.rounds).flat_map(|round| plan.iter().map(move |p| (round, p)));
    for (i, (round, p)) in rounds.enumerate() {
        let interruption = Interruption {
            during: i + 1,
            of: total,
        };
        if crate::driver::interrupted() {
            return Ok((Runs(runs), Some(interruption)));
        }
        let spec = &p.spec;
        let seed = config
            .seed
            .wrapping_add((round as u64).wrapping_mul(ROUND_SEED_STRIDE));
        let w = spec.warehouses;
        let setup = Setup {
            warehouses: w,
            pool_mib: spec.pool_mib,
            latency: Some(cal.latency()),
            threads: spec.threads,
            shared_insert_pages: config.shared_insert_pages,
        };
        let n = if config.rounds > 1 {
            format!(
                "run {} of {total} (round {} of {})",
                i + 1,
                round + 1,
                config.rounds
            )
        } else {
            format!("run {} of {total}", i + 1)
        };
        let what = format!("{n}: {} ({})", p.label, setup.describe());
        say(format_args!("{what}..."));
        let mut session =
            Session::open(&dirs.base(w), &dirs.copy(w), setup).context(what.clone())?;
        session.warm(seed).context(what.clone())?;
        let measured = session.measure(
            spec.threads,
            config.warmup,
            config.duration,
            seed,
            spec.execution(),
        );
        let m = match measured {
            Err(e) if crate::driver::is_interruption(&e) => None,
            Err(e) => return Err(e.context(what)),
            Ok(m) => Some(m),
        };
        let (consistency, conditions) = session.check().context(what.clone())?;
        if consistency != "ok" {
            bail!("{what}: TPC-C consistency {consistency}");
        }
        // Interrupted: checked above, and left out, measured for part of its time or none.
        let Some(m) = m.filter(|m| !m.result.interrupted) else {
            session.close().context(what.clone())?;
            say(format_args!(
                "{n}: interrupted (Ctrl-C or SIGTERM): left out; {} run{} made",
                runs.len(),
                plural(runs.len())
            ));
            return Ok((Runs(runs), Some(interruption)));
        };
        let (open_s, refill_s, refill_reads) = (session.open_s, session.warm_s, session.warm_reads);
        session.close().context(what.clone())?;
        let mut result = m.result;
        result.consistency = consistency;
        result.conditions = conditions.iter().map(ConditionResult::from).collect();
        let run = Run {
            spec: spec.clone(),
            label: p.label.clone(),
            round,
            result,
            new_order_mean_ms: m.new_order_mean_ms,
            read_us: cal.read_us,
            open_s,
            refill_s,
            refill_reads,
        };
        say(format_args!(
            "{n}: {:.0} tpmC; New-Order: lock wait {:.1} ms, I/O {:.1} ms",
            run.tpmc(),
            run.new_order().lock_wait_ms(),
            run.new_order().io_ms()
        ));
        runs.push(run);
    }
    Ok((Runs(runs), None))
}

/// A plan stopped by Ctrl-C or SIGTERM: during which run (from 1) of how many.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Interruption {
    during: usize,
    of: usize,
}

/// `glass charm` interrupted (Ctrl-C or SIGTERM) before its first run ended: nothing was
/// measured and nothing written.
#[derive(Debug, thiserror::Error)]
#[error("interrupted {0}: nothing was measured, nothing written")]
pub struct InterruptedBeforeARun(&'static str);

/// A part of the report: its Markdown and its JSON.
struct Section {
    markdown: String,
    json: Json,
}

/// A Markdown table: the first column left-aligned, the others right-aligned.
fn md_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let align: Vec<&str> = (0..header.len())
        .map(|i| if i == 0 { "---" } else { "---:" })
        .collect();
    let mut text = format!("| {} |\n|{}|\n", header.join(" | "), align.join("|"));
    for row in rows {
        let _ = writeln!(text, "| {} |", row.join(" | "));
    }
    text.push('\n');
    text
}

/// `value` with `digits` decimals, or a dash for none.
fn num(value: Option<f64>, digits: usize) -> String {
    value.map_or_else(|| "–".to_string(), |v| format!("{v:.digits$}"))
}

/// `a / b` as a ratio ("×2.65"), or a dash.
fn times(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("×{:.2}", a / b),
        _ => "–".to_string(),
    }
}

/// Draws `lines` (name, points) against `x_label`; returns the Markdown that shows it.
fn figure(
    out: &Path,
    name: &str,
    title: &str,
    x_label: &str,
    y_label: &str,
    lines: Vec<(String, Vec<(f64, f64)>)>,
) -> anyhow::Result<String> {
    let lines = Lines {
        title: title.to_string(),
        x_label: x_label.to_string(),
        y_label: y_label.to_string(),
        lines: lines
            .into_iter()
            .enumerate()
            .map(|(color, (name, points))| Line {
                name,
                points,
                ranges: Vec::new(),
                color,
                dashed: false,
            })
            .collect(),
    };
    Ok(if line_figure(&lines, out, name)? {
        format!("![{title}]({name}.svg)\n\n")
    } else {
        format!("{title}: not drawn (no font; see the note on stderr).\n\n")
    })
}

/// A metric of a run, for a figure.
type Metric = fn(&Run) -> f64;

fn new_order_io_ms(r: &Run) -> f64 {
    r.new_order().io_ms()
}

fn new_order_lock_ms(r: &Run) -> f64 {
    r.new_order().lock_wait_ms()
}

/// Mean time of a physical read or write over every type (Tables 2 and 5).
fn ms_per_io(r: &Run) -> f64 {
    r.all().ms_per_io()
}

/// Conventional and HTSTE at each point: (x, conventional, HTSTE).
type Pairs<'a> = Vec<(f64, Option<&'a Run>, Option<&'a Run>)>;

/// One line per strategy of `pairs`, of `metric`.
fn pair_lines(pairs: &Pairs<'_>, metric: Metric) -> Vec<(String, Vec<(f64, f64)>)> {
    SWEPT
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let points = pairs
                .iter()
                .filter_map(|(x, c, h)| [*c, *h][i].map(|r| (*x, metric(r))))
                .collect();
            (s.name().to_string(), points)
        })
        .collect()
}

/// How many of `pairs` (conventional, HTSTE) satisfy `holds`, of those with both.
fn count_pairs(pairs: &Pairs<'_>, holds: impl Fn(&Run, &Run) -> bool) -> (usize, usize) {
    let both: Vec<(&Run, &Run)> = pairs.iter().filter_map(|(_, c, h)| c.zip(*h)).collect();
    (both.iter().filter(|(c, h)| holds(c, h)).count(), both.len())
}

/// Figures 2 and 3, Tables 1 to 3.
fn concurrency_report(
    config: &CharmConfig,
    cal: &Calibration,
    runs: &Runs,
    out: &Path,
) -> anyhow::Result<Section> {
    let (w, pool) = (config.warehouses, cal.main_pool());
    let pairs: Pairs<'_> = config
        .threads
        .iter()
        .map(|&t| {
            let at = |s| runs.get(&RunSpec::new(w, pool.mib, t, s));
            (t as f64, at(Strategy::Conventional), at(Strategy::Htste))
        })
        .collect();
    let mut md = format!(
        "## Concurrency sweep (Figures 2 and 3, Tables 1 to 3)\n\n\
         w = {w}, the {} MiB pool ({:.2} % hit), conventional and HTSTE at each concurrency. \
         Per New-Order: I/O time, lock wait, and lock wait over the mean response time. \
         Device: the page I/Os × L over the measured time (100 % keeps one device busy; the \
         order lines have a second); near 100 % the device, not lock waits, bounds \
         throughput, which then follows the page reads per transaction (reads/txn; it varies \
         from run to run with what the pool held at the start).\n\n",
        pool.mib, pool.hit_percent
    );
    let value = |r: Option<&Run>, f: Metric, d: usize| num(r.map(f), d);
    let rows: Vec<Vec<String>> = pairs
        .iter()
        .map(|&(t, c, h)| {
            vec![
                format!("{t}"),
                value(c, Run::tpmc, 0),
                value(h, Run::tpmc, 0),
                times(h.map(Run::tpmc), c.map(Run::tpmc)),
                value(c, new_order_io_ms, 1),
                value(h, new_order_io_ms, 1),
                value(c, new_order_lock_ms, 2),
                value(h, new_order_lock_ms, 2),
                value(c, Run::lock_share_percent, 1),
                value(h, Run::lock_share_percent, 1),
                value(c, Run::device_load_percent, 0),
                value(h, Run::device_load_percent, 0),
                value(c, Run::reads_per_txn, 2),
                value(h, Run::reads_per_txn, 2),
            ]
        })
        .collect();
    md.push_str(&md_table(
        &[
            "threads",
            "tpmC conv",
            "tpmC htste",
            "htste/conv",
            "I/O ms conv",
            "I/O ms htste",
            "lock ms conv",
            "lock ms htste",
            "lock/resp % conv",
            "lock/resp % htste",
            "device % conv",
            "device % htste",
            "reads/txn conv",
            "reads/txn htste",
        ],
        &rows,
    ));
    let best = pairs
        .iter()
        .filter_map(|(t, c, h)| {
            let (c, h) = (c.map(Run::tpmc)?, h.map(Run::tpmc)?);
            (c > 0.0).then_some((*t, h / c))
        })
        .max_by(|a, b| a.1.total_cmp(&b.1));
    if let Some((t, ratio)) = best {
        let _ = writeln!(
            md,
            "HTSTE's New-Order throughput is at most ×{ratio:.2} conventional's here (at {t} \
             threads); the paper's peaks at ×2.65 (+164 %) at 4.\n"
        );
    }
    let figures: [(&str, &str, &str, Metric); 4] = [
        (
            "fig2a",
            "Figure 2a: New-Order throughput against concurrency",
            "New-Order tpmC",
            Run::tpmc,
        ),
        (
            "fig2b",
            "Figure 2b: I/O time per New-Order",
            "ms per New-Order",
            new_order_io_ms,
        ),
        (
            "fig3a",
            "Figure 3a: lock wait per New-Order",
            "ms per New-Order",
            new_order_lock_ms,
        ),
        (
            "fig3b",
            "Figure 3b: New-Order's lock wait over its response time",
            "% of the response time",
            Run::lock_share_percent,
        ),
    ];
    for (name, title, y_label, metric) in figures {
        let lines = pair_lines(&pairs, metric);
        md.push_str(&figure(out, name, title, "threads", y_label, lines)?);
    }

    // Table 1.
    let lock_io = |t: usize| {
        pairs
            .iter()
            .find(|p| p.0 == t as f64)
            .and_then(|p| p.1)
            .map(|r| r.new_order().lock_wait_io_percent())
    };
    let rows: Vec<Vec<String>> = PAPER_TABLE1
        .iter()
        .map(|&(t, paper)| vec![format!("{t}"), num(lock_io(t), 1), format!("{paper:.1}")])
        .collect();
    md.push_str(
        "### Table 1: share of New-Order's lock wait while another transaction read from the \
         device (conventional, %)\n\n",
    );
    md.push_str(&md_table(&["threads", "ours", "paper"], &rows));
    let ours: Vec<f64> = PAPER_TABLE1
        .iter()
        .filter_map(|&(t, _)| lock_io(t))
        .collect();
    md.push_str(&if ours.len() < 2 {
        "Too few of these concurrencies were measured to compare the trend.\n\n".to_string()
    } else if ours.windows(2).all(|p| p[1] <= p[0]) {
        "Ours falls as concurrency grows, as the paper's does.\n\n".to_string()
    } else {
        "Ours does not fall steadily as concurrency grows; the paper's falls from 93.3 % to \
         18.4 %.\n\n"
            .to_string()
    });

    // Tables 2 and 3.
    let paper_at = |table: &[[f64; 7]; 2], which: usize, t: f64| {
        PAPER_CONCURRENCY
            .iter()
            .position(|&c| c as f64 == t)
            .map(|i| table[which][i])
    };
    let (slower, n) = count_pairs(&pairs, |c, h| ms_per_io(h) > ms_per_io(c));
    let table2 = format!(
        "HTSTE's page I/O takes longer than conventional's at {slower} of {n} concurrencies; \
         in the paper at 6 of 7 (all from 2 threads)."
    );
    let (fewer, n) = count_pairs(&pairs, |c, h| h.abort_percent() <= c.abort_percent());
    let table3 = format!(
        "HTSTE aborts no more often than conventional at {fewer} of {n} concurrencies; in \
         the paper at 7 of 7."
    );
    let mut tables23 = Vec::new();
    for (title, metric, paper, digits, sentence) in [
        (
            "Table 2: mean time of a page read or write (ms)",
            ms_per_io as Metric,
            &PAPER_TABLE2,
            2,
            table2,
        ),
        (
            "Table 3: deadlock aborts (% of commits and aborts)",
            Run::abort_percent as Metric,
            &PAPER_TABLE3,
            1,
            table3,
        ),
    ] {
        let rows: Vec<Vec<String>> = pairs
            .iter()
            .map(|&(t, c, h)| {
                vec![
                    format!("{t}"),
                    value(c, metric, digits),
                    num(paper_at(paper, 0, t), digits),
                    value(h, metric, digits),
                    num(paper_at(paper, 1, t), digits),
                ]
            })
            .collect();
        let _ = writeln!(md, "### {title}\n");
        md.push_str(&md_table(
            &["threads", "conv", "paper (BDB)", "htste", "paper (HTSTE)"],
            &rows,
        ));
        let _ = writeln!(md, "{sentence}\n");
        tables23.push(json!(pairs
            .iter()
            .map(|&(t, c, h)| json!({
                "threads": t,
                "conventional": c.map(metric),
                "htste": h.map(metric),
                "paper_bdb": paper_at(paper, 0, t),
                "paper_htste": paper_at(paper, 1, t),
            }))
            .collect::<Vec<_>>()));
    }
    let json = json!({
        "warehouses": w,
        "pool_mib": pool.mib,
        "points": pairs.iter().map(|&(t, c, h)| json!({
            "threads": t,
            "conventional": c.map(point_json),
            "htste": h.map(point_json),
        })).collect::<Vec<_>>(),
        "table1": PAPER_TABLE1.iter().map(|&(t, paper)| json!({
            "threads": t, "ours": lock_io(t), "paper": paper,
        })).collect::<Vec<_>>(),
        "table2": tables23[0],
        "table3": tables23[1],
    });
    Ok(Section { markdown: md, json })
}

/// A run's numbers the figures plot.
fn point_json(r: &Run) -> Json {
    json!({
        "tpmc": r.tpmc(),
        "new_order_io_ms": r.new_order().io_ms(),
        "new_order_lock_wait_ms": r.new_order().lock_wait_ms(),
        "new_order_lock_wait_io_percent": r.new_order().lock_wait_io_percent(),
        "new_order_mean_ms": r.new_order_mean_ms,
        "lock_share_percent": r.lock_share_percent(),
        "ms_per_io": ms_per_io(r),
        "abort_percent": r.abort_percent(),
        "device_load_percent": r.device_load_percent(),
        "reads_per_txn": r.reads_per_txn(),
        "hit_percent": r.all().hit_percent(),
    })
}

/// Figures 4 and 5, Tables 4 and 5.
fn buffer_report(
    config: &CharmConfig,
    cal: &Calibration,
    runs: &Runs,
    out: &Path,
) -> anyhow::Result<Section> {
    let w = config.warehouses;
    let pairs: Pairs<'_> = cal
        .pools
        .iter()
        .map(|p| {
            let at = |s| runs.get(&RunSpec::new(w, p.mib, CONCURRENCY, s));
            (
                p.mib as f64,
                at(Strategy::Conventional),
                at(Strategy::Htste),
            )
        })
        .collect();
    let mut md = format!(
        "## Buffer sweep (Figures 4 and 5, Tables 4 and 5)\n\n\
         w = {w}, {CONCURRENCY} threads, conventional and HTSTE on each pool (hit rates from \
         the calibration).\n\n"
    );
    let value = |r: Option<&Run>, f: Metric, d: usize| num(r.map(f), d);
    let rows: Vec<Vec<String>> = cal
        .pools
        .iter()
        .zip(&pairs)
        .zip(PAPER_CACHES)
        .map(|((p, &(_, c, h)), paper)| {
            vec![
                format!("{} MiB", p.mib),
                format!("{:.2}", p.hit_percent),
                paper.to_string(),
                value(c, Run::tpmc, 0),
                value(h, Run::tpmc, 0),
                times(h.map(Run::tpmc), c.map(Run::tpmc)),
                value(c, new_order_lock_ms, 2),
                value(h, new_order_lock_ms, 2),
                value(c, new_order_io_ms, 1),
                value(h, new_order_io_ms, 1),
                value(c, Run::device_load_percent, 0),
                value(h, Run::device_load_percent, 0),
                value(c, Run::reads_per_txn, 2),
                value(h, Run::reads_per_txn, 2),
            ]
        })
        .collect();
    md.push_str(&md_table(
        &[
            "pool",
            "hit %",
            "paper's cache",
            "tpmC conv",
            "tpmC htste",
            "htste/conv",
            "lock ms conv",
            "lock ms htste",
            "I/O ms conv",
            "I/O ms htste",
            "device % conv",
            "device % htste",
            "reads/txn conv",
            "reads/txn htste",
        ],
        &rows,
    ));
    let hits: Vec<String> = cal
        .pools
        .iter()
        .map(|p| format!("{:.2} %", p.hit_percent))
        .collect();
    let x_label = format!("buffer pool, MiB (hit rates {})", hits.join(", "));
    let figures: [(&str, &str, &str, Metric); 3] = [
        (
            "fig4",
            "Figure 4: New-Order throughput against the pool",
            "New-Order tpmC",
            Run::tpmc,
        ),
        (
            "fig5a",
            "Figure 5a: lock wait per New-Order against the pool",
            "ms per New-Order",
            new_order_lock_ms,
        ),
        (
            "fig5b",
            "Figure 5b: I/O time per New-Order against the pool",
            "ms per New-Order",
            new_order_io_ms,
        ),
    ];
    for (name, title, y_label, metric) in figures {
        let lines = pair_lines(&pairs, metric);
        md.push_str(&figure(out, name, title, &x_label, y_label, lines)?);
    }

    // Table 4.
    md.push_str(
        "### Table 4: share of instances that read from the device (conventional, %; ours / \
         the paper's)\n\n",
    );
    let io_percent = |i: usize, name: &str| {
        let t = pairs[i].1.map(|r| r.of_type(name))?;
        (t.instances > 0).then(|| t.io_percent())
    };
    let rows: Vec<Vec<String>> = TYPES
        .iter()
        .zip(PAPER_TABLE4)
        .map(|(name, paper)| {
            let mut row = vec![name.to_string()];
            for (i, paper) in paper.iter().enumerate() {
                row.push(format!("{} / {paper:.1}", num(io_percent(i, name), 1)));
            }
            row
        })
        .collect();
    let header: Vec<String> = cal
        .pools
        .iter()
        .zip(PAPER_CACHES)
        .map(|(p, paper)| format!("{} MiB ({paper})", p.mib))
        .collect();
    let mut columns = vec!["type"];
    columns.extend(header.iter().map(String::as_str));
    md.push_str(&md_table(&columns, &rows));
    let last = pairs.len() - 1;
    let falling = TYPES
        .iter()
        .filter(|name| match (io_percent(0, name), io_percent(last, name)) {
            (Some(small), Some(large)) => large < small,
            _ => false,
        })
        .count();
    let _ = writeln!(
        md,
        "For {falling} of {} types fewer instances read on the largest pool than on the \
         smallest; in the paper for all 5.\n",
        TYPES.len()
    );

    // Table 5.
    md.push_str("### Table 5: mean time of a page read or write (ms)\n\n");
    let rows: Vec<Vec<String>> = pairs
        .iter()
        .enumerate()
        .map(|(i, &(mib, c, h))| {
            vec![
                format!("{mib} MiB"),
                value(c, ms_per_io, 2),
                format!("{:.2}", PAPER_TABLE5[0][i]),
                value(h, ms_per_io, 2),
                format!("{:.2}", PAPER_TABLE5[1][i]),
            ]
        })
        .collect();
    md.push_str(&md_table(
        &["pool", "conv", "paper (BDB)", "htste", "paper (HTSTE)"],
        &rows,
    ));
    let (slower, n) = count_pairs(&pairs, |c, h| ms_per_io(h) > ms_per_io(c));
    let _ = writeln!(
        md,
        "HTSTE's page I/O takes longer than conventional's on {slower} of {n} pools; in the \
         paper on 4 of 4.\n"
    );
    let json = json!({
        "warehouses": w,
        "threads": CONCURRENCY,
        "points": cal.pools.iter().zip(&pairs).enumerate().map(|(i, (p, &(_, c, h)))| json!({
            "pool_mib": p.mib,
            "hit_percent": p.hit_percent,
            "paper_cache": PAPER_CACHES[i],
            "conventional": c.map(point_json),
            "htste": h.map(point_json),
            "table4": TYPES.iter().enumerate().map(|(t, name)| json!({
                "type": name, "ours": io_percent(i, name), "paper": PAPER_TABLE4[t][i],
            })).collect::<Vec<_>>(),
            "table5": {
                "conventional": c.map(ms_per_io), "htste": h.map(ms_per_io),
                "paper_bdb": PAPER_TABLE5[0][i], "paper_htste": PAPER_TABLE5[1][i],
            },
        })).collect::<Vec<_>>(),
    });
    Ok(Section { markdown: md, json })
}

/// OTSTE's mis-prefetch at `warehouses` and `threads`: of every instance, the share whose
/// operate stage read from the device after its fetch stage, in percent.
fn mis_prefetch_percent(
    runs: &Runs,
    cal: &Calibration,
    warehouses: u64,
    threads: usize,
) -> Option<f64> {
    let spec = RunSpec::new(
        warehouses,
        cal.pool_for(warehouses).mib,
        threads,
        Strategy::Otste,
    );
    runs.get(&spec).map(|r| {
        let all = r.all();
        percent(all.mis_prefetched as f64, all.instances as f64)
    })
}

/// The paper's Table 6 column for a warehouse count (its w = 1 or w = 5).
fn paper_table6(warehouses: u64) -> &'static [f64; 5] {
    if warehouses == 1 {
        &PAPER_TABLE6[0]
    } else {
        &PAPER_TABLE6[1]
    }
}

/// Table 6.
fn table6_report(config: &CharmConfig, cal: &Calibration, runs: &Runs) -> Section {
    let ws = config.table_warehouses();
    let mut md = format!(
        "### Table 6: OTSTE transactions that read in the operate stage after converting (% of \
         instances, every type)\n\nThe 99.7 % pools: {}.\n\n",
        ws.iter()
            .map(|&w| format!("w = {w}: {} MiB", cal.pool_for(w).mib))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut header = vec!["threads".to_string()];
    for &w in &ws {
        header.push(format!("ours w={w}"));
        header.push(format!("paper w={}", if w == 1 { 1 } else { 5 }));
    }
    if ws == [1] {
        header.push("paper w=5".into());
    }
    let rows: Vec<Vec<String>> = config
        .table6_concurrency()
        .iter()
        .map(|&c| {
            let paper_i = TABLE6_CONCURRENCY.iter().position(|&t| t == c).unwrap_or(0);
            let mut row = vec![format!("{c}")];
            for &w in &ws {
                row.push(num(mis_prefetch_percent(runs, cal, w, c), 1));
                row.push(format!("{:.1}", paper_table6(w)[paper_i]));
            }
            if ws == [1] {
                row.push(format!("{:.1}", PAPER_TABLE6[1][paper_i]));
            }
            row
        })
        .collect();
    let columns: Vec<&str> = header.iter().map(String::as_str).collect();
    md.push_str(&md_table(&columns, &rows));
    let measured: Vec<(u64, usize, f64)> = ws
        .iter()
        .flat_map(|&w| {
            config
                .table6_concurrency()
                .iter()
                .filter_map(move |&c| mis_prefetch_percent(runs, cal, w, c).map(|p| (w, c, p)))
        })
        .collect();
    if let Some(&(w, c, largest)) = measured.iter().max_by(|a, b| a.2.total_cmp(&b.2)) {
        let _ = writeln!(
            md,
            "Largest here: {largest:.1} % (w = {w}, {c} threads); the paper's largest: 4.4 % \
             (w = 1) and 3.3 % (w = 5).\n"
        );
    }
    let json = json!(measured
        .iter()
        .map(|&(w, c, p)| json!({
            "warehouses": w, "threads": c, "ours": p,
            "paper": TABLE6_CONCURRENCY.iter().position(|&t| t == c).map(|i| paper_table6(w)[i]),
        }))
        .collect::<Vec<_>>());
    Section { markdown: md, json }
}

/// Table 7.
fn table7_report(config: &CharmConfig, cal: &Calibration, runs: &Runs) -> Section {
    let (w, pool) = (config.warehouses, cal.main_pool().mib);
    let mut md = format!(
        "### Table 7: the four strategies at {CONCURRENCY} threads (w = {w}, {pool} MiB pool)\n\n\
         The added CPU stands for the paper's 30 ms idle loop, scaled by L over its 12 ms \
         disks: {:.1} ms, spun after each run of a body, in each stage.\n\n",
        ms(cal.spin())
    );
    let mut json_rows = Vec::new();
    for (i, spin) in table7_spins(config, cal).into_iter().enumerate() {
        let at = |s: Strategy| runs.get(&RunSpec::new(w, pool, CONCURRENCY, s).with_spin(spin));
        let conventional = at(Strategy::Conventional).map(Run::tpmc);
        let paper_conventional = PAPER_TABLE7_TPMC[i][3];
        let rows: Vec<Vec<String>> = TABLE7_STRATEGIES
            .iter()
            .enumerate()
            .map(|(k, &s)| {
                let r = at(s);
                json_rows.push(json!({
                    "spin_ms": ms(spin),
                    "strategy": s.name(),
                    "tpmc": r.map(Run::tpmc),
                    "new_order_lock_wait_ms": r.map(new_order_lock_ms),
                    "paper_tpmc": PAPER_TABLE7_TPMC[i][k],
                    "paper_lock_wait_ms": PAPER_TABLE7_LOCK_MS[i][k],
                }));
                vec![
                    s.name().to_string(),
                    num(r.map(Run::tpmc), 0),
                    times(r.map(Run::tpmc), conventional),
                    format!("{:.0}", PAPER_TABLE7_TPMC[i][k]),
                    format!("×{:.2}", PAPER_TABLE7_TPMC[i][k] / paper_conventional),
                    num(r.map(new_order_lock_ms), 2),
                    format!("{:.1}", PAPER_TABLE7_LOCK_MS[i][k]),
                ]
            })
            .collect();
        let _ = writeln!(
            md,
            "Added CPU {:.1} ms (the paper's {} ms):\n",
            ms(spin),
            if spin.is_zero() { 0 } else { 30 }
        );
        md.push_str(&md_table(
            &[
                "strategy",
                "tpmC",
                "vs conv",
                "paper tpmC",
                "paper vs BDB",
                "New-Order lock ms",
                "paper lock ms",
            ],
            &rows,
        ));
        let mut ours: Vec<(Strategy, f64)> = TABLE7_STRATEGIES
            .iter()
            .filter_map(|&s| at(s).map(|r| (s, r.tpmc())))
            .collect();
        ours.sort_by(|a, b| b.1.total_cmp(&a.1));
        let mut paper: Vec<(Strategy, f64)> = TABLE7_STRATEGIES
            .iter()
            .zip(PAPER_TABLE7_TPMC[i])
            .map(|(&s, t)| (s, t))
            .collect();
        paper.sort_by(|a, b| b.1.total_cmp(&a.1));
        let order = |v: &[(Strategy, f64)]| {
            v.iter()
                .map(|(s, _)| s.name())
                .collect::<Vec<_>>()
                .join(" > ")
        };
        if ours.len() == TABLE7_STRATEGIES.len() {
            let same = order(&ours) == order(&paper);
            let _ = writeln!(
                md,
                "By tpmC, ours: {}; the paper's: {}{}.\n",
                order(&ours),
                order(&paper),
                if same { " (the same order)" } else { "" }
            );
        }
    }
    Section {
        markdown: md,
        json: json!(json_rows),
    }
}

/// Table 8.
fn table8_report(config: &CharmConfig, cal: &Calibration, runs: &Runs) -> Section {
    let ws = config.table_warehouses();
    let at = |w: u64| {
        runs.get(&RunSpec::new(
            w,
            cal.pool_for(w).mib,
            CONCURRENCY,
            Strategy::Tste,
        ))
    };
    let pinned = |w: u64, name: &str| at(w).map(|r| r.of_type(name).pinned_kib(r.page_size()));
    let mut md =
        format!("### Table 8: memory pinned per instance (KiB; TSTE, {CONCURRENCY} threads)\n\n");
    let mut header = vec!["type".to_string()];
    for &w in &ws {
        header.push(format!("ours w={w}"));
        header.push(format!("paper w={}", if w == 1 { 1 } else { 5 }));
    }
    let rows: Vec<Vec<String>> = TYPES
        .iter()
        .enumerate()
        .map(|(t, name)| {
            let mut row = vec![name.to_string()];
            for &w in &ws {
                row.push(num(pinned(w, name), 0));
                row.push(format!("{:.0}", PAPER_TABLE8[usize::from(w != 1)][t]));
            }
            row
        })
        .collect();
    let columns: Vec<&str> = header.iter().map(String::as_str).collect();
    md.push_str(&md_table(&columns, &rows));
    let w = config.warehouses;
    let most = TYPES
        .iter()
        .filter_map(|name| pinned(w, name).map(|k| (*name, k)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    if let Some((name, _)) = most {
        let _ = writeln!(
            md,
            "At w = {w} {name} pins the most{}.\n",
            if name == "stock_level" {
                ", as in the paper"
            } else {
                "; in the paper stock_level"
            }
        );
    }
    let json = json!(ws
        .iter()
        .map(|&w| json!({
            "warehouses": w,
            "pool_mib": cal.pool_for(w).mib,
            "types": TYPES.iter().enumerate().map(|(t, name)| json!({
                "type": name,
                "ours_kib": pinned(w, name),
                "paper_kb": PAPER_TABLE8[usize::from(w != 1)][t],
            })).collect::<Vec<_>>(),
        }))
        .collect::<Vec<_>>());
    Section { markdown: md, json }
}

/// HTSTE's threshold sweep.
fn threshold_report(config: &CharmConfig, cal: &Calibration, runs: &Runs) -> Section {
    let (w, pool) = (config.warehouses, cal.main_pool().mib);
    let at =
        |t: f64| runs.get(&RunSpec::new(w, pool, CONCURRENCY, Strategy::Htste).with_threshold(t));
    let mut md = format!(
        "### HTSTE's mis-prefetch threshold ({CONCURRENCY} threads, w = {w})\n\n\
         The paper gives no threshold; a type whose operate stages read more than it of their \
         page accesses after a fetch stage runs conventionally.\n\n"
    );
    let classes = |r: &Run| {
        r.classes()
            .iter()
            .map(|(name, class)| format!("{name} {class}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let rows: Vec<Vec<String>> = THRESHOLDS
        .iter()
        .map(|&t| {
            let r = at(t);
            vec![
                format!("{:.0} %", t * 100.0),
                num(r.map(Run::tpmc), 0),
                num(r.map(new_order_lock_ms), 2),
                r.map_or_else(|| "–".to_string(), classes),
            ]
        })
        .collect();
    md.push_str(&md_table(
        &[
            "threshold",
            "tpmC",
            "New-Order lock ms",
            "classes at the end",
        ],
        &rows,
    ));
    let measured: Vec<String> = THRESHOLDS
        .iter()
        .filter_map(|&t| at(t).map(classes))
        .collect();
    if measured.len() > 1 {
        md.push_str(if measured.windows(2).all(|p| p[0] == p[1]) {
            "Every threshold ends with the same classes.\n\n"
        } else {
            "The classes differ between thresholds.\n\n"
        });
    }
    let json = json!(THRESHOLDS
        .iter()
        .map(|&t| {
            let r = at(t);
            json!({
                "threshold": t,
                "tpmc": r.map(Run::tpmc),
                "new_order_lock_wait_ms": r.map(new_order_lock_ms),
                "decisions": r.and_then(|r| r.result.execution.as_ref()).map(|e| &e.decisions),
            })
        })
        .collect::<Vec<_>>());
    Section { markdown: md, json }
}

/// One goal's line.
struct Goal {
    what: String,
    /// `None`: not measured.
    met: Option<bool>,
}

fn goals(config: &CharmConfig, cal: &Calibration, runs: &Runs) -> Vec<Goal> {
    let (w, pool) = (config.warehouses, cal.main_pool().mib);
    let conventional_spec = RunSpec::new(w, pool, CONCURRENCY, Strategy::Conventional);
    let htste_spec = RunSpec::new(w, pool, CONCURRENCY, Strategy::Htste);
    let conventional = runs.get(&conventional_spec);
    let htste = runs.get(&htste_spec);
    let mut goals = Vec::new();
    match conventional.zip(htste) {
        Some((c, h)) => {
            // Each round's ratio compares two runs of one round; with several rounds the goal
            // is judged on their median.
            let ratios: Vec<f64> = runs
                .rounds_of(&conventional_spec)
                .iter()
                .zip(runs.rounds_of(&htste_spec))
                .map(|(c, h)| h.tpmc() / c.tpmc().max(1e-9))
                .collect();
            let (tpmc, by_round) = match median_range(&ratios) {
                Some((median, ..)) if ratios.len() > 1 => {
                    let each: Vec<String> = ratios.iter().map(|r| format!("×{r:.2}")).collect();
                    (
                        median,
                        format!(", the median of the rounds' {}", each.join(", ")),
                    )
                }
                _ => (h.tpmc() / c.tpmc().max(1e-9), String::new()),
            };
            goals.push(Goal {
                what: format!(
                    "HTSTE over conventional at {CONCURRENCY} threads: New-Order tpmC ×{tpmc:.2}\
                     {by_round} ({:.0} against {:.0}; goal ≥ ×{GOAL_TPMC_RATIO})",
                    h.tpmc(),
                    c.tpmc()
                ),
                met: Some(tpmc >= GOAL_TPMC_RATIO),
            });
            let (cl, hl) = (new_order_lock_ms(c), new_order_lock_ms(h));
            // Neither waiting is no reduction; HTSTE alone not waiting, an unbounded one.
            let ratio = match (cl > 0.0, hl > 0.0) {
                (_, true) => cl / hl,
                (true, false) => f64::INFINITY,
                (false, false) => 1.0,
            };
            let less = if ratio.is_finite() {
                format!("×{ratio:.1}")
            } else {
                "×∞".to_string()
            };
            goals.push(Goal {
                what: format!(
                    "HTSTE over conventional at {CONCURRENCY} threads: New-Order lock wait \
                     {less} less ({hl:.2} ms against {cl:.2} ms; goal ≥ \
                     ×{GOAL_LOCK_WAIT_RATIO})"
                ),
                met: Some(ratio >= GOAL_LOCK_WAIT_RATIO),
            });
        }
        None => goals.push(Goal {
            what: format!("HTSTE over conventional at {CONCURRENCY} threads: not measured"),
            met: None,
        }),
    }
    let mis: Vec<(u64, usize, f64)> = config
        .table_warehouses()
        .into_iter()
        .flat_map(|w| {
            config
                .table6_concurrency()
                .iter()
                .filter_map(move |&c| mis_prefetch_percent(runs, cal, w, c).map(|p| (w, c, p)))
        })
        .collect();
    goals.push(match mis.iter().max_by(|a, b| a.2.total_cmp(&b.2)) {
        Some(&(w, c, largest)) => Goal {
            what: format!(
                "OTSTE mis-prefetch under {GOAL_MIS_PREFETCH_PERCENT} % at every concurrency \
                 measured: the largest {largest:.1} % (w = {w}, {c} thread{})",
                plural(c)
            ),
            met: Some(largest < GOAL_MIS_PREFETCH_PERCENT),
        },
        None => Goal {
            what: "OTSTE mis-prefetch: not measured".into(),
            met: None,
        },
    });
    goals
}

/// Every point's tpmC in each round, with the median and range: with one round, nothing.
fn rounds_report(config: &CharmConfig, runs: &Runs) -> Option<Section> {
    if config.rounds < 2 {
        return None;
    }
    let mut md = format!(
        "## Rounds

The plan ran {} times, round after round; each table shows the run of \
         median tpmC among a point's rounds. New-Order tpmC by round:\n\n",
        config.rounds
    );
    let mut header = vec!["run".to_string()];
    header.extend((1..=config.rounds).map(|r| format!("round {r}")));
    header.extend(["median".to_string(), "range".to_string()]);
    let mut rows = Vec::new();
    let mut json = Vec::new();
    for (spec, label) in runs.specs() {
        let tpmc: Vec<f64> = runs.rounds_of(spec).iter().map(|r| r.tpmc()).collect();
        let Some((median, low, high)) = median_range(&tpmc) else {
            continue;
        };
        let mut row = vec![label.to_string()];
        row.extend(tpmc.iter().map(|t| format!("{t:.0}")));
        row.extend([format!("{median:.0}"), format!("{low:.0}–{high:.0}")]);
        rows.push(row);
        json.push(json!({
            "label": label,
            "spec": spec.to_json(),
            "tpmc": tpmc,
            "median": median,
            "min": low,
            "max": high,
        }));
    }
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    md.push_str(&md_table(&header, &rows));
    Some(Section {
        markdown: md,
        json: Json::Array(json),
    })
}

/// The calibration's part of the report.
fn calibration_report(cal: &Calibration) -> String {
    let mut md = String::from("## Calibration\n\n");
    let _ = writeln!(
        md,
        "- CPU per transaction: {:.1} µs (conventional, 1 thread, no device latency, a {} MiB \
         pool: {} transactions in {:.2} s).",
        cal.cpu_us, cal.cpu_pool_mib, cal.cpu_txns, cal.cpu_seconds
    );
    let _ = writeln!(
        md,
        "- Device latency L: {} µs per page read and page write (one queue per data device; \
         TPC-C's order lines on the second) and per log write ({}).",
        cal.read_us,
        if cal.read_us_given {
            format!(
                "given by --read-us: {:.1} × the CPU per transaction",
                cal.read_us as f64 / cal.cpu_us.max(1e-9)
            )
        } else {
            "100 × the CPU per transaction, rounded up to 100 µs".to_string()
        }
    );
    let _ = writeln!(
        md,
        "- Pools sized by hit rate (conventional, {CONCURRENCY} threads, no device latency, \
         after a warm-up; hit rate = 1 − reads / page fixes over every type); {} pools \
         tried:\n",
        cal.probes.len()
    );
    let mut rows: Vec<Vec<String>> = cal
        .pools
        .iter()
        .zip(PAPER_CACHES)
        .map(|(p, paper)| {
            vec![
                p.target_percent
                    .map_or("twice the 99.7 % pool".to_string(), |t| format!("{t} %")),
                format!("{}", p.mib),
                format!("{:.2}", p.hit_percent),
                paper.to_string(),
            ]
        })
        .collect();
    if let Some(p) = &cal.pool_w1 {
        rows.push(vec![
            format!("{} % (w = 1)", HIT_TARGETS[MAIN_POOL]),
            format!("{}", p.mib),
            format!("{:.2}", p.hit_percent),
            "512 MB (w = 1)".into(),
        ]);
    }
    md.push_str(&md_table(
        &["target", "MiB", "hit % reached", "the paper's cache"],
        &rows,
    ));
    md
}

/// How every run was made.
const METHOD: &str = "## How each run was made\n\n\
A fresh copy of the load, opened at the machine's speed; its pool filled at the machine's \
speed with conventional transactions on 4 threads until it had turned over (as many reads as \
frames, or as the database's pages where it holds them all) or a quarter second read under 1 % \
of that, and its dirty pages written; the run's warm-up and measured phase on the device; \
TPC-C's consistency check at the machine's speed (every run's: ok).\n\n";

/// One of Tables 6 to 8 or the threshold sweep, from the runs.
type TablePart = fn(&CharmConfig, &Calibration, &Runs) -> Section;

/// The whole report: Markdown and JSON.
fn report(
    config: &CharmConfig,
    cal: &Calibration,
    runs: &Runs,
    interrupted: Option<Interruption>,
    out: &Path,
    elapsed: Duration,
    others_cpu_share: Option<f64>,
) -> anyhow::Result<(String, Json)> {
    let mut md = format!(
        "# Charm: two-stage transaction execution (paper 001)\n\n\
         TPC-C, the paper's mix (43/43/4.7/4.7/4.6), w = {}, page-level locking{}, every read's \
         locks held to commit (degree 3, Stock-Level's too, as in Berkeley DB), asynchronous \
         log; every page read and write and every log write on an emulated device of latency \
         L (one queue per device). Runs of {} s after {} s of warm-up; {} run{} in {:.0} s.\n\n",
        config.warehouses,
        if config.shared_insert_pages {
            ", one insertion page per table shared by every thread (--shared-insert-pages)"
        } else {
            ""
        },
        config.duration.as_secs_f64(),
        config.warmup.as_secs_f64(),
        runs.0.len(),
        plural(runs.0.len()),
        elapsed.as_secs_f64()
    );
    if let Some(i) = interrupted {
        let _ = writeln!(
            md,
            "**Interrupted** (Ctrl-C or SIGTERM) during run {} of {}: the tables hold the {} \
             run{} made before it; that run (cut short, or not begun) and the {} planned \
             after it are not in them (\"–\").\n",
            i.during,
            i.of,
            runs.0.len(),
            plural(runs.0.len()),
            i.of - i.during
        );
    }
    if let Some(line) = others_cpu_share.and_then(crate::machine_cpu::report_note) {
        let _ = writeln!(md, "**Machine**: {line}.\n");
    }
    let goals = goals(config, cal, runs);
    md.push_str("## Goals\n\n");
    for g in &goals {
        let mark = match g.met {
            Some(true) => "✓",
            Some(false) => "✗",
            None => "–",
        };
        let _ = writeln!(md, "- {mark} {}", g.what);
    }
    md.push('\n');
    md.push_str(&calibration_report(cal));
    let mut tables = serde_json::Map::new();
    if let Some(s) = rounds_report(config, runs) {
        md.push_str(&s.markdown);
        tables.insert("rounds".into(), s.json);
    }
    let skipped = |md: &mut String, title: &str, e: Experiment| {
        let _ = writeln!(md, "## {title}\n\nNot run (--skip {}).\n", e.name());
    };
    if config.runs(Experiment::Concurrency) {
        let s = concurrency_report(config, cal, runs, out)?;
        md.push_str(&s.markdown);
        tables.insert("concurrency".into(), s.json);
    } else {
        skipped(
            &mut md,
            "Concurrency sweep (Figures 2a, 2b, 3a, 3b; Tables 1, 2, 3)",
            Experiment::Concurrency,
        );
    }
    if config.runs(Experiment::Buffer) {
        let s = buffer_report(config, cal, runs, out)?;
        md.push_str(&s.markdown);
        tables.insert("buffer".into(), s.json);
    } else {
        skipped(
            &mut md,
            "Buffer sweep (Figures 4, 5a, 5b; Tables 4, 5)",
            Experiment::Buffer,
        );
    }
    md.push_str("## Execution strategies (Tables 6, 7, 8)\n\n");
    let parts: [(Experiment, &str, TablePart); 4] = [
        (Experiment::MisPrefetch, "Table 6", table6_report),
        (Experiment::Strategies, "Table 7", table7_report),
        (Experiment::Pinned, "Table 8", table8_report),
        (Experiment::Threshold, "HTSTE's threshold", threshold_report),
    ];
    for (experiment, title, part) in parts {
        if experiment == Experiment::Threshold && config.quick {
            let _ = writeln!(md, "### {title}\n\nNot run (--quick).\n");
        } else if config.runs(experiment) {
            let s = part(config, cal, runs);
            md.push_str(&s.markdown);
            tables.insert(experiment.name().into(), s.json);
        } else {
            let _ = writeln!(
                md,
                "### {title}\n\nNot run (--skip {}).\n",
                experiment.name()
            );
        }
    }
    md.push_str(METHOD);
    md.push_str(
        "## How this differs from the paper\n\n\
         - The device is emulated: L per page, one queue per device, order lines on a second \
         device; the log on a third.\n\
         - Each transaction draws its home warehouse and district afresh (the paper ran each \
         transaction as a process of its own), so every concurrency uses every warehouse. The \
         pools are sized at 4 threads, the buffer sweep's.\n\
         - Runs last seconds, each point one run (with --rounds, the median of the rounds' \
         runs); the paper's are the mean of ten runs of 10,000 transactions after 80,000 of \
         warm-up.\n\
         - Each run starts from a fresh copy of the load, its pool filled at the machine's \
         speed; the paper's database grew from run to run.\n\
         - Response time (Figure 3b) is the mean latency of a New-Order from its first attempt \
         to its end, retries included.\n",
    );
    let json = json!({
        "config": {
            "quick": config.quick,
            "warehouses": config.warehouses,
            "duration_s": config.duration.as_secs_f64(),
            "warmup_s": config.warmup.as_secs_f64(),
            "read_us": config.read_us,
            "threads": config.threads,
            "seed": config.seed,
            "rounds": config.rounds,
            "skip": config.skip.iter().map(|e| e.name()).collect::<Vec<_>>(),
            "shared_insert_pages": config.shared_insert_pages,
        },
        "elapsed_s": elapsed.as_secs_f64(),
        "others_cpu_share": others_cpu_share,
        "interrupted": interrupted.map(|i| json!({"during_run": i.during, "of": i.of})),
        "calibration": cal,
        "spin_ms": ms(cal.spin()),
        "goals": goals.iter().map(|g| json!({"goal": g.what, "met": g.met})).collect::<Vec<_>>(),
        "tables": tables,
        "runs": runs.0.iter().map(|r| json!({
            "label": r.label,
            "round": r.round,
            "spec": r.spec.to_json(),
            "tpmc": r.tpmc(),
            "new_order_mean_ms": r.new_order_mean_ms,
            "open_s": r.open_s,
            "refill_s": r.refill_s,
            "refill_reads": r.refill_reads,
            "result": r.result,
        })).collect::<Vec<_>>(),
    });
    Ok((md, json))
}

/// What [`run_charm`] wrote: the report (charm.md), and whether Ctrl-C or SIGTERM ended the
/// runs early (the report then covers the runs made before it).
#[derive(Clone, Debug)]
pub struct CharmReport {
    pub markdown: String,
    pub interrupted: bool,
}

/// Runs the experiments; writes charm.md, charm.json and the figures into `config.out`, and
/// returns the report.
pub fn run_charm(config: &CharmConfig) -> anyhow::Result<CharmReport> {
    config.validate()?;
    let started = *STARTED.get_or_init(Instant::now);
    let watch = crate::machine_cpu::Watch::start();
    std::fs::create_dir_all(&config.out)
        .with_context(|| format!("create {}", config.out.display()))?;
    let temporary = match &config.db {
        Some(_) => None,
        None => Some(
            tempfile::Builder::new()
                .prefix("glass-charm-")
                .tempdir()
                .context("create a temporary directory for the databases")?,
        ),
    };
    let root = match (&config.db, &temporary) {
        (Some(dir), _) => dir.clone(),
        (None, Some(t)) => t.path().to_path_buf(),
        (None, None) => unreachable!("a temporary directory is made when --db is not given"),
    };
    let dirs = Dirs {
        work: root.join("charm-work"),
        root,
    };
    if dirs.work.exists() {
        std::fs::remove_dir_all(&dirs.work)
            .with_context(|| format!("remove {}", dirs.work.display()))?;
    }
    let stop_if_interrupted = |during: &'static str| {
        if crate::driver::interrupted() {
            return Err(InterruptedBeforeARun(during));
        }
        Ok(())
    };
    ensure_loaded(&dirs.base(config.warehouses), config.warehouses)?;
    if config.needs_w1() {
        ensure_loaded(&dirs.base(1), 1)?;
    }
    stop_if_interrupted("while loading")?;
    let cal = match calibrate(config, &dirs) {
        Err(e) if crate::driver::is_interruption(&e) => {
            Err(InterruptedBeforeARun("while calibrating").into())
        }
        other => other,
    }
    .and_then(|cal| Ok(stop_if_interrupted("while calibrating").map(|()| cal)?));
    let cal = match cal {
        Ok(cal) => cal,
        Err(e) => {
            // The calibration's copies of the load go; the load (in --db) stays.
            let _ = std::fs::remove_dir_all(&dirs.work);
            return Err(e);
        }
    };
    let plan = plan(config, &cal);
    let (runs, interrupted) = execute(config, &dirs, &cal, &plan)?;
    std::fs::remove_dir_all(&dirs.work)
        .with_context(|| format!("remove {}", dirs.work.display()))?;
    if runs.0.is_empty() && interrupted.is_some() {
        return Err(InterruptedBeforeARun("during the first run").into());
    }
    let (md, json) = report(
        config,
        &cal,
        &runs,
        interrupted,
        &config.out,
        started.elapsed(),
        watch.share(),
    )?;
    let write = |name: &str, text: String| {
        let path = config.out.join(name);
        std::fs::write(&path, text).with_context(|| format!("write {}", path.display()))
    };
    write("charm.md", md.clone())?;
    write("charm.json", serde_json::to_string_pretty(&json)? + "\n")?;
    Ok(CharmReport {
        markdown: md,
        interrupted: interrupted.is_some(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warm_up_goes_on_while_a_chunk_reads_a_hundredth_of_what_the_pool_holds() {
        // A pool of 10,000 frames on 8,000 pages holds them all: the goal is the pages.
        let goal = 8_000;
        // A chunk of 90 reads: under 1 % of the frames (where the warm-up used to stop), over
        // 1 % of the pages: pages the runs read are still cold, go on.
        assert!(!warm_enough(goal, 5_000, 90));
        // Under 1 % of the pages: done.
        assert!(warm_enough(goal, 5_000, 79));
        // Turned over: every page read once.
        assert!(warm_enough(goal, 8_000, 2_000));
        // A pool smaller than the data: the goal is its frames.
        let goal = 1_000;
        assert!(!warm_enough(goal, 900, 10));
        assert!(warm_enough(goal, 900, 9));
        assert!(warm_enough(goal, 1_000, 500));
    }

    #[test]
    fn median_and_range_of_odd_even_and_no_rounds() {
        assert_eq!(median_range(&[3.0, 1.0, 2.0]), Some((2.0, 1.0, 3.0)));
        assert_eq!(median_range(&[4.0, 1.0, 2.0, 8.0]), Some((3.0, 1.0, 8.0)));
        assert_eq!(median_range(&[5.0]), Some((5.0, 5.0, 5.0)));
        assert_eq!(median_range(&[]), None);
    }

    #[test]
    fn thread_lists_are_sorted_without_repeats_and_bad_ones_refused() {
        assert_eq!(parse_threads("4, 1,2,4").unwrap(), vec![1, 2, 4]);
        for bad in ["", ",", "0", "1,x", "65"] {
            let e = parse_threads(bad).unwrap_err();
            assert!(e.0.contains("--threads-list"), "{bad:?}: {e}");
        }
        assert_eq!(
            Experiment::parse_list("buffer, table7").unwrap(),
            vec![Experiment::Buffer, Experiment::Strategies]
        );
        assert!(Experiment::parse_list("table9").is_err());
    }

    fn calibration(warehouses: u64) -> Calibration {
        let pool = |target_percent, mib| Pool {
            target_percent,
            mib,
            hit_percent: 0.0,
        };
        Calibration {
            cpu_us: 60.0,
            cpu_txns: 1,
            cpu_seconds: 1.0,
            cpu_pool_mib: 1024,
            read_us: 6000,
            read_us_given: false,
            page_size: 8192,
            db_pages: 1,
            pools: vec![
                pool(Some(95.5), 10),
                pool(Some(99.0), 40),
                pool(Some(99.7), 60),
                pool(None, 120),
            ],
            pool_w1: (warehouses != 1).then(|| pool(Some(99.7), 20)),
            probes: Vec::new(),
        }
    }

    /// Every experiment's runs, each once: a run two experiments ask for (the buffer sweep's
    /// 99.7 % pool at 4 threads is the concurrency sweep's and Table 7's) is planned once.
    #[test]
    fn the_plan_makes_each_run_once() {
        let config = CharmConfig::new(false);
        let cal = calibration(config.warehouses);
        let plan = plan(&config, &cal);
        // Sweep 7 × 2; buffer 3 more pools × 2; Table 6: 5 at w = 1 and 5 at w = 5; Table 7:
        // TSTE without spin, all four with; Table 8 at w = 1; the thresholds of 5 and 20 %.
        assert_eq!(plan.len(), 14 + 6 + 10 + 5 + 1 + 2);
        for (i, p) in plan.iter().enumerate() {
            assert!(plan[..i].iter().all(|q| q.spec != p.spec), "{}", p.label);
        }
        assert!(plan
            .iter()
            .all(|p| p.spec.pool_mib == cal.pool_for(p.spec.warehouses).mib
                || p.label.starts_with("buffer sweep")));

        let quick = CharmConfig::new(true);
        let plan = super::plan(&quick, &calibration(1));
        // Sweep 3 × 2; buffer 3 more pools × 2; Table 6 at 2 and 4; Table 7: TSTE (the
        // others are the sweep's and Table 6's); Table 8 is Table 7's TSTE.
        assert_eq!(plan.len(), 6 + 6 + 2 + 1);
        let skipping = CharmConfig {
            skip: vec![Experiment::Buffer, Experiment::MisPrefetch],
            ..quick
        };
        assert_eq!(super::plan(&skipping, &calibration(1)).len(), 6 + 2);
    }

    #[test]
    fn table_7s_added_cpu_scales_the_papers_idle_loop_with_the_device() {
        // 30 ms at the paper's 12 ms: 15 ms at 6 ms.
        assert_eq!(calibration(1).spin(), Duration::from_millis(15));
    }
}
