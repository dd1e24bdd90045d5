//! The three things the `glass` command does with a workload: bench, load, check.
//!
//! ```text
//!   run_bench:  validate (flags, --json writable, sizes: capacity) ─► open_loaded ─►
//!               terminals ─► drive ─► check() ─► BenchResult (+ JSON)
//!   run_load:   validate ─► refuse a non-empty DIR ─► open DIR ─► create schema ─► load ─►
//!               close ─► write manifest
//!
//!   open_loaded (bench, and profile's runs):
//!     in memory          ─► open ─► create schema ─► load
//!     DIR with manifest  ─► same workload and data options? ─► open ─► find schema
//!     DIR absent / empty ─► open ─► load ─► close ─► write manifest ─► reopen
//!     anything else      ─► refused before anything is written, naming what DIR holds
//!
//!   run_check:  read DIR's manifest ─► open (recovering, creating nothing) ─► find schema
//!               ─► verify_integrity ─► check() if intact ─► CheckOutcome
//!               (an open that a damaged page fails: verify the page file alone)
//! ```
//!
//! A directory without a manifest but with files in it is never written into: it may hold a
//! partial load, another program's files, or a database whose manifest was lost, and loading
//! on top of any of them would mix data.
//!
//! Errors are `anyhow` errors with context naming what was being done; configuration errors
//! the user must fix are [`UsageError`]s (one line, naming the bad value and the valid ones),
//! so the command line can tell them apart (exit code 2).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context};
use engine::db::{Database, DbConfig};
use engine::{IntegrityReport, IntegrityStep, Preset, Switches};
use parking_lot::Mutex;
use workloads::{Condition, Distribution, Terminal, Workload, WorkloadOptions};

use crate::acklog::{AckLog, AckingExecutor};
use crate::driver::{drive, DriverConfig, DriverOutcome, Executor, Stop};
use crate::embedded::EmbeddedExecutor;
use crate::manifest::{distribution_name, mix_name, LoadManifest};
use crate::progress::{bar, ProgressLine};
use crate::report::{
    rfc3339_utc, BenchResult, HandoffSummary, LockSummary, LogSummary, RoundResult,
    RunConfiguration,
};

/// A configuration the user must change; its message is one line naming the bad value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Everything `glass bench` needs.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// "tpcc", "tpcb", "ycsb" or "voter".
    pub workload: String,
    pub options: WorkloadOptions,
    /// Worker threads (terminals).
    pub threads: usize,
    pub stop: Stop,
    pub warmup: Duration,
    /// The database: `path: None` is in memory; `threads` is overwritten with `threads`.
    pub db: DbConfig,
    /// Terminal i draws its inputs from `seed + i` (in round r of several, from
    /// `seed + r * threads + i`, so no two rounds repeat a stream).
    pub seed: u64,
    /// Measured rounds after the one load, each with its own warm-up and terminals (at least 1).
    pub rounds: u32,
    /// Also write the result as JSON to this file.
    pub json: Option<PathBuf>,
    /// Attempts of one transaction aborted as a deadlock victim before the run fails.
    pub retry_limit: u32,
    /// Print nothing but errors (no status lines, no progress).
    pub quiet: bool,
    /// When `db.path` holds a loaded database, run at the scale it was loaded with instead
    /// of `options.scale` (set when the user gave no `--scale`).
    pub adopt_loaded_scale: bool,
    /// Append every acknowledged commit's receipts to this file (see [`crate::acklog`]).
    pub ack_log: Option<PathBuf>,
    /// Open loop at this many transactions a second (see [`DriverConfig::rate`]); `None`:
    /// closed loop.
    pub rate: Option<f64>,
    /// Run each transaction under this execution strategy, with per-type accounting
    /// (`--execution`); `None`: begin, run, commit, with none.
    pub execution: Option<engine::execution::ExecutionConfig>,
    /// Count page-latch handoffs between threads (`BufferPool::track_handoffs`) from the end
    /// of the load, and report those from the first measured phase on.
    pub handoffs: bool,
}

impl BenchConfig {
    /// How long the run goes on, every round and warm-up included (what its default pool
    /// makes room for).
    pub fn run_length(&self) -> crate::capacity::RunLength {
        let rounds = f64::from(self.rounds.max(1));
        let warmup = self.warmup.as_secs_f64() * rounds;
        match self.stop {
            Stop::Duration(d) => crate::capacity::RunLength::Timed {
                threads: self.threads,
                seconds: warmup + d.as_secs_f64() * rounds,
            },
            Stop::Txns(n) => crate::capacity::RunLength::Counted {
                threads: self.threads,
                txns: n.saturating_mul(u64::from(self.rounds.max(1))),
                warmup_seconds: warmup,
            },
        }
    }

    /// Defaults of `glass bench WORKLOAD`: its default scale, 2 threads, 10 s after a 1 s
    /// warm-up, the full preset, in memory.
    pub fn new(workload: &str) -> BenchConfig {
        BenchConfig {
            workload: workload.to_string(),
            options: WorkloadOptions {
                scale: default_scale(workload),
                ..WorkloadOptions::default()
            },
            threads: 2,
            stop: Stop::Duration(Duration::from_secs(10)),
            warmup: Duration::from_secs(1),
            db: DbConfig::default(),
            seed: 42,
            rounds: 1,
            json: None,
            retry_limit: 1000,
            quiet: false,
            adopt_loaded_scale: false,
            ack_log: None,
            rate: None,
            execution: None,
            handoffs: false,
        }
    }
}

/// The scale `--scale` defaults to: 1 warehouse (TPC-C), 1 branch (TPC-B), 100,000 records
/// (YCSB), 10,000 voters (Voter).
pub fn default_scale(workload: &str) -> u64 {
    match workload {
        "ycsb" => 100_000,
        _ => 1,
    }
}

/// Builds the switches of `preset` with `settings` (`NAME=on|off`) applied in order, and
/// validates them for `threads` worker threads.
pub fn build_switches(
    preset: &str,
    settings: &[String],
    threads: usize,
) -> Result<Switches, UsageError> {
    let preset = Preset::from_name(preset).map_err(|e| UsageError(e.to_string()))?;
    if preset == Preset::Optimal {
        if let Some(setting) = settings.first() {
            return Err(UsageError(format!(
                "--switch {setting}: the optimal preset is the hand-coded kernel, which has no switches"
            )));
        }
    }
    let mut switches = Switches::preset(preset);
    for setting in settings {
        switches
            .apply(setting)
            .map_err(|e| UsageError(format!("--switch: {e}")))?;
    }
    validate_switches(&switches, threads)?;
    Ok(switches)
}

pub(crate) fn validate_switches(switches: &Switches, threads: usize) -> Result<(), UsageError> {
    if threads == 0 {
        return Err(UsageError("--threads must be at least 1".to_string()));
    }
    switches
        .validate(threads)
        .map_err(|e| UsageError(format!("{e} (use --threads 1, or leave the switch on)")))
}

/// The YCSB distribution used when none is given: the one YCSB's core workload file names.
pub fn standard_distribution(ycsb_workload: char) -> Distribution {
    Distribution::standard_for(ycsb_workload)
}

pub(crate) fn build_workload(
    name: &str,
    options: &WorkloadOptions,
) -> anyhow::Result<Arc<dyn Workload>> {
    workloads::by_name(name, options).map_err(|e| anyhow::Error::new(UsageError(e)))
}

/// Prints status lines on stderr unless quiet.
pub(crate) struct Status {
    quiet: bool,
}

impl Status {
    pub(crate) fn new(quiet: bool) -> Status {
        Status { quiet }
    }

    /// A line the user must see even when quiet.
    pub(crate) fn warn(&self, line: std::fmt::Arguments<'_>) {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{line}");
    }

    pub(crate) fn say(&self, line: std::fmt::Arguments<'_>) {
        if !self.quiet {
            let mut err = std::io::stderr().lock();
            let _ = writeln!(err, "{line}");
        }
    }
}

/// What a scale means, for status lines.
pub(crate) fn describe_scale(workload: &str, scale: u64) -> String {
    let plural = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    match workload {
        "tpcc" => plural(scale, "warehouse", "warehouses"),
        "tpcb" => plural(scale, "branch", "branches"),
        "ycsb" => plural(scale, "record", "records"),
        "voter" => format!("{} voters", scale.saturating_mul(10_000)),
        _ => format!("scale {scale}"),
    }
}

fn open(config: &DbConfig) -> anyhow::Result<Arc<Database>> {
    let what = match &config.path {
        Some(p) => format!("open database in {}", p.display()),
        None => "open in-memory database".to_string(),
    };
    Database::open(config.clone()).context(what)
}

/// Creates the schema and loads `workload`, drawing a progress bar; returns the load time.
fn load(
    workload: &dyn Workload,
    db: &Arc<Database>,
    scale: u64,
    status: &Status,
) -> anyhow::Result<Duration> {
    // A load runs at the machine's speed; a run's measured phase pays the emulated devices.
    db.set_device(false);
    status.say(format_args!(
        "loading {} ({})...",
        workload.name(),
        describe_scale(workload.name(), scale)
    ));
    let started = Instant::now();
    workload
        .create_schema(db)
        .with_context(|| format!("create the {} schema", workload.name()))?;
    let progress = Mutex::new(if status.quiet {
        ProgressLine::with_enabled(false)
    } else {
        ProgressLine::stderr()
    });
    let report = |done: u64, total: u64| {
        let fraction = if total == 0 {
            1.0
        } else {
            done as f64 / total as f64
        };
        progress.lock().update(|| {
            format!(
                "loading {} {} {:>3.0}%  {:.1} s",
                workload.name(),
                bar(fraction, 30),
                fraction * 100.0,
                started.elapsed().as_secs_f64()
            )
        });
    };
    workload
        .load(db, &report)
        .with_context(|| format!("load {}", workload.name()))?;
    db.finish_load();
    progress.lock().finish();
    let took = started.elapsed();
    status.say(format_args!("loaded in {:.2} s", took.as_secs_f64()));
    Ok(took)
}

/// Runs `workload`'s consistency check, drawing on the progress line (unless `quiet`) which
/// table it is reading and how many of its rows it has read: on a database of gigabytes the
/// check reads for tens of seconds, or minutes with a cold page cache.
pub(crate) fn check_consistency(
    workload: &dyn Workload,
    db: &Arc<Database>,
    quiet: bool,
) -> anyhow::Result<Vec<Condition>> {
    let line = ProgressDrawer::new(quiet);
    let conditions = workload
        .check_with_progress(db, &|table, rows| line.draw(&CheckStep { table, rows }))
        .with_context(|| format!("check {} consistency", workload.name()));
    line.finish();
    conditions
}

/// A progress line for a step that reports itself as text (a check's, an integrity
/// verification's), followed by the time since the step began; shared by reference with the
/// code that reports.
struct ProgressDrawer {
    line: Mutex<ProgressLine>,
    started: Instant,
}

impl ProgressDrawer {
    /// Draws on stderr if it is a terminal, unless `quiet`.
    fn new(quiet: bool) -> ProgressDrawer {
        ProgressDrawer {
            line: Mutex::new(if quiet {
                ProgressLine::with_enabled(false)
            } else {
                ProgressLine::stderr()
            }),
            started: Instant::now(),
        }
    }

    fn draw(&self, step: &dyn std::fmt::Display) {
        let elapsed = self.started.elapsed();
        self.line.lock().update(|| progress_text(step, elapsed));
    }

    /// Draws a step of an integrity verification: the start of a table's walk (its heap and
    /// B+-trees) at once, so that every table's name is shown however soon the last report
    /// was drawn, the others as [`ProgressDrawer::draw`] does.
    fn draw_integrity(&self, step: IntegrityStep<'_>) {
        if let IntegrityStep::Structures { pages: 0, .. } = step {
            let elapsed = self.started.elapsed();
            self.line
                .lock()
                .update_now(|| progress_text(&step, elapsed));
        } else {
            self.draw(&step);
        }
    }

    fn finish(&self) {
        self.line.lock().finish();
    }
}

/// A progress line's text: the step, then the time since it began.
fn progress_text(step: &dyn std::fmt::Display, elapsed: Duration) -> String {
    format!("{step}  {:.1} s", elapsed.as_secs_f64())
}

/// Where a consistency check has got: the table it is reading and its rows read so far.
struct CheckStep<'a> {
    table: &'a str,
    rows: u64,
}

impl std::fmt::Display for CheckStep<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "checking consistency: {}, ", self.table)?;
        if self.rows < 1_000_000 {
            write!(f, "{} rows read", self.rows)
        } else {
            write!(f, "{:.1} M rows read", self.rows as f64 / 1e6)
        }
    }
}

/// Runs a benchmark: builds `config.workload` by name, then [`run_workload`].
pub fn run_bench(config: &BenchConfig) -> anyhow::Result<BenchResult> {
    if let Some(path) = &config.json {
        check_writable(path)
            .map_err(|e| UsageError(format!("--json {}: cannot write it: {e}", path.display())))?;
    }
    let manifest = match &config.db.path {
        Some(dir) => inspect_dir(dir)?,
        None => None,
    };
    let mut options = config.options.clone();
    if let (true, Some(manifest)) = (config.adopt_loaded_scale, &manifest) {
        options.scale = manifest.scale;
    }
    let mut db = config.db.clone();
    if db.pool_mib == 0 {
        db.pool_mib =
            crate::capacity::default_pool_mib(&config.workload, &options, &db, config.run_length());
    }
    let config = BenchConfig {
        options,
        db,
        ..config.clone()
    };
    let loading = manifest.is_none();
    crate::capacity::check_machine(&config.workload, &config.options, &config.db, loading)?;
    if config.db.switches.optimal {
        return crate::optimal::run_optimal(&config);
    }
    let workload = build_workload(&config.workload, &config.options)?;
    run_workload(workload, &config)
}

/// Runs a benchmark of `workload` (named `config.workload`, built with `config.options`):
/// opens (and if needed loads) the database, drives it, checks it.
pub fn run_workload(
    workload: Arc<dyn Workload>,
    config: &BenchConfig,
) -> anyhow::Result<BenchResult> {
    let status = Status::new(config.quiet);
    crate::optimal::refuse_kernel(&config.db.switches, "running a workload on the engine")?;
    validate_switches(&config.db.switches, config.threads)?;
    match config.stop {
        Stop::Duration(d) if d.is_zero() => {
            bail!(UsageError("--duration must be more than 0 seconds".into()))
        }
        Stop::Txns(0) => bail!(UsageError("--txns must be at least 1".into())),
        _ => {}
    }
    let options = &config.options;
    let timestamp = rfc3339_utc(SystemTime::now());
    let mut db_config = config.db.clone();
    db_config.threads = config.threads;
    db_config.attribute_lock_waits |= config.execution.is_some();
    // Before any work: a file that cannot be written fails the run now, not after the load.
    let ack_log = match &config.ack_log {
        Some(path) => Some(AckLog::open(path, &config.workload, db_config.durable)?),
        None => None,
    };

    let (db, load_s) = open_loaded(
        "bench",
        &config.workload,
        workload.as_ref(),
        options,
        &db_config,
        &status,
    )?;
    let load_s = load_s.map(|took| took.as_secs_f64());

    let txn_names = workload.txn_names();
    let strategies = match &config.execution {
        Some(execution) => Some(
            engine::execution::Executor::new(&db, execution.clone(), txn_names)
                .map_err(|e| UsageError(e.to_string()))?,
        ),
        None => None,
    };
    // The emulated devices delay the run, warm-up included (a warm-up at the machine's speed
    // would leave the pages it dirtied for the measured phase to write back): the load, the
    // open and the check run at the machine's speed.
    db.set_device(true);
    let embedded = EmbeddedExecutor::with(db.clone(), strategies);
    if config.handoffs {
        if let Some(pool) = db.pool() {
            pool.track_handoffs();
        }
    }
    let acking;
    let executor: &dyn Executor = match &ack_log {
        Some(log) => {
            acking = AckingExecutor {
                inner: &embedded,
                log,
            };
            &acking
        }
        None => &embedded,
    };
    let terminals = |seed: u64| {
        (0..config.threads)
            .map(|i| {
                workload
                    .terminal(&db, i, config.threads, seed.wrapping_add(i as u64))
                    .with_context(|| format!("start terminal {i}"))
            })
            .collect::<anyhow::Result<Vec<_>>>()
    };
    let log_before = db.log().map(|l| l.stats());
    let pool_before = db.pool().map(|p| p.io());
    let locks_before = db.lock_manager().map(|m| m.stats());
    let checkpoints_before = (
        db.background_checkpoints_taken(),
        db.checkpoints_in_commits(),
        db.checkpoint_waits(),
    );
    // The load's checkpoints are not the run's.
    db.take_checkpoint_times();
    let cpu = crate::machine_cpu::Watch::start();
    let outcome = run_rounds(config, terminals, executor, txn_names, &status)?;
    let others_cpu = cpu.share();
    let checkpoints = db_config.path.is_some().then(|| {
        let times = db.take_checkpoint_times();
        crate::report::CheckpointSummary {
            background: db.background_checkpoints_taken() - checkpoints_before.0,
            in_commits: db.checkpoints_in_commits() - checkpoints_before.1,
            waits: db.checkpoint_waits() - checkpoints_before.2,
            total_us: times.total_ns / 1_000,
            longest_us: times.longest_ns / 1_000,
        }
    });
    let log = db
        .log()
        .zip(log_before)
        .map(|(l, before)| LogSummary::between(&before, &l.stats(), db_config.durable));
    let pool = crate::report::PoolSummary::since(&db, &db_config, pool_before);
    let locks = db
        .lock_manager()
        .zip(locks_before)
        .map(|(m, before)| LockSummary::between(&before, &m.stats()));
    let last_deadlock = db.last_deadlock();

    db.set_device(false);
    let handoffs = embedded.handoffs_measured();
    let execution = embedded
        .strategies
        .as_ref()
        .map(|s| crate::report::ExecutionSummary::of(s, db.pool().map_or(0, |p| p.page_size())));
    status.say(format_args!("checking consistency..."));
    let conditions = check_consistency(workload.as_ref(), &db, status.quiet)?;
    drop(embedded);
    db.close().context("close the database")?;
    bench_result(
        config,
        &db_config,
        timestamp,
        load_s,
        txn_names,
        &outcome,
        &conditions,
    )
    .map(|r| {
        r.with_log(log)
            .with_checkpoints(checkpoints)
            .with_pool(pool)
            .with_locks(locks, last_deadlock)
            .with_execution(execution)
            .with_handoffs(
                handoffs.map(|h| HandoffSummary::of(h, outcome.merged.stats.txn_count())),
            )
            .with_others_cpu(others_cpu)
    })
    .and_then(|r| write_json(config, r))
}

/// Writes `result` as JSON to the file `config.json` names, if any, and returns it.
pub(crate) fn write_json(config: &BenchConfig, result: BenchResult) -> anyhow::Result<BenchResult> {
    if let Some(path) = &config.json {
        std::fs::write(path, result.to_json() + "\n")
            .with_context(|| format!("write results to {}", path.display()))?;
    }
    Ok(result)
}

/// What the rounds of a run measured: all of them together, and each.
pub(crate) struct Rounds {
    pub merged: DriverOutcome,
    pub each: Vec<RoundResult>,
}

/// Runs `config.rounds` rounds through [`run_driver`], each with terminals from
/// `terminals(seed)` (round r's first terminal seed is `config.seed + r * threads`).
pub(crate) fn run_rounds(
    config: &BenchConfig,
    mut terminals: impl FnMut(u64) -> anyhow::Result<Vec<Box<dyn Terminal>>>,
    executor: &dyn Executor,
    txn_names: &[&str],
    status: &Status,
) -> anyhow::Result<Rounds> {
    if config.rounds == 0 {
        bail!(UsageError("--rounds must be at least 1".into()));
    }
    let mut merged: Option<DriverOutcome> = None;
    let mut each = Vec::with_capacity(config.rounds as usize);
    for round in 0..config.rounds {
        let seed = config
            .seed
            .wrapping_add(u64::from(round).wrapping_mul(config.threads as u64));
        let label = if config.rounds > 1 {
            format!("round {} of {}: ", round + 1, config.rounds)
        } else {
            String::new()
        };
        let outcome = run_driver(
            config,
            &label,
            terminals(seed)?,
            executor,
            txn_names,
            status,
        )?;
        let result = RoundResult::of(&outcome.stats.overall(), outcome.elapsed);
        if config.rounds > 1 {
            status.say(format_args!(
                "round {} of {}: {:.0} txn/s",
                round + 1,
                config.rounds,
                result.tps
            ));
        }
        each.push(result);
        let interrupted = outcome.interrupted;
        merge_round(&mut merged, outcome);
        if interrupted {
            // Ended early: the rounds measured so far are the run's.
            break;
        }
    }
    let merged = merged.expect("at least one round ran");
    Ok(Rounds { merged, each })
}

/// Adds a round's outcome to the rounds so far: statistics merged, measured times summed.
pub(crate) fn merge_round(merged: &mut Option<DriverOutcome>, outcome: DriverOutcome) {
    match merged {
        None => *merged = Some(outcome),
        Some(m) => {
            m.stats.merge(&outcome.stats);
            m.elapsed += outcome.elapsed;
            m.interrupted |= outcome.interrupted;
        }
    }
}

/// Drives `terminals` through `executor` as `config` says (warm-up, stop, retries), with a
/// status line (after `label`) first and the progress line while it runs.
pub(crate) fn run_driver(
    config: &BenchConfig,
    label: &str,
    terminals: Vec<Box<dyn Terminal>>,
    executor: &dyn Executor,
    txn_names: &[&str],
    status: &Status,
) -> anyhow::Result<DriverOutcome> {
    let what = match config.stop {
        Stop::Duration(d) => format!("{} s", d.as_secs_f64()),
        Stop::Txns(n) => format!("{n} transactions"),
    };
    status.say(format_args!(
        "{label}running {} for {what} on {} thread{} ({} s warm-up)...",
        config.workload,
        config.threads,
        if config.threads == 1 { "" } else { "s" },
        config.warmup.as_secs_f64()
    ));
    let driver_config = DriverConfig {
        warmup: config.warmup,
        stop: config.stop,
        retry_limit: config.retry_limit,
        seed: config.seed,
        rate: config.rate,
    };
    let mut progress = if config.quiet {
        ProgressLine::with_enabled(false)
    } else {
        ProgressLine::stderr()
    };
    drive(
        terminals,
        executor,
        txn_names,
        &driver_config,
        &mut progress,
    )
    .with_context(|| format!("run {}", config.workload))
}

/// The result record of a run (its full configuration, statistics and consistency), also
/// written as JSON (by [`write_json`]) when `config.json` names a file.
pub(crate) fn bench_result(
    config: &BenchConfig,
    db_config: &DbConfig,
    timestamp: String,
    load_s: Option<f64>,
    txn_names: &[&str],
    outcome: &Rounds,
    conditions: &[Condition],
) -> anyhow::Result<BenchResult> {
    let options = &config.options;
    let switches = &db_config.switches;
    let run_configuration = RunConfiguration {
        glass_version: env!("CARGO_PKG_VERSION").to_string(),
        timestamp,
        workload: config.workload.clone(),
        mix: mix_name(options.mix).to_string(),
        scale: options.scale,
        ycsb_workload: (config.workload == "ycsb")
            .then(|| options.ycsb_workload.to_ascii_uppercase().to_string()),
        distribution: (config.workload == "ycsb")
            .then(|| distribution_name(options.ycsb_distribution).to_string()),
        preset: switches.preset_name().unwrap_or("custom").to_string(),
        switches: switches.off_names().iter().map(|s| s.to_string()).collect(),
        threads: config.threads,
        seed: config.seed,
        durable: db_config.durable,
        prefetch: db_config.prefetch,
        log_runs: db_config.log_runs,
        huge_pages: db_config.huge_pages,
        log_run_bytes: if db_config.log_runs {
            db_config.log_run_bytes
        } else {
            0
        },
        pool_mib: db_config.pool_mib,
        db: db_config.path.as_ref().map(|p| p.display().to_string()),
        log_sync: db_config
            .path
            .as_ref()
            .map(|_| db_config.log_sync.name().to_string()),
        log_prealloc_mib: db_config
            .path
            .as_ref()
            .map(|_| db_config.log_prealloc_bytes >> 20),
        log_segment_mib: db_config
            .path
            .as_ref()
            .map(|_| db_config.log_segment_bytes >> 20),
        commit_gather: db_config.gather_commits && db_config.durable,
        page_cleaners: if db_config.path.is_some() {
            db_config.page_cleaners
        } else {
            0
        },
        full_page_images: db_config.path.is_some()
            && db_config.full_page_images.on(
                db_config.durable,
                db_config.doublewrite.on(db_config.durable),
            ),
        doublewrite: db_config.path.is_some() && db_config.doublewrite.on(db_config.durable),
        early_lock_release: db_config.early_lock_release && db_config.durable,
        warmup_s: config.warmup.as_secs_f64(),
        load_s,
        cpu_idle: crate::cpu_idle::CpuIdle::probe(),
    };
    let result = BenchResult::new(
        run_configuration,
        txn_names,
        &outcome.merged.stats,
        outcome.merged.elapsed,
        conditions,
    )
    .with_rounds(outcome.each.clone())
    .with_interrupted(outcome.merged.interrupted);
    Ok(result)
}

/// Opens the database `db_config` names with `workload` (named `name`, built with `options`)
/// loaded, for `command` ("bench", "profile"): in memory, loads it; in a directory holding a
/// complete load of the same workload and data options, opens it; in an absent or empty
/// directory, loads, closes, writes the manifest and reopens. Anything else is refused before
/// anything is written (see [`inspect_dir`]). Returns the load time when it loaded.
pub(crate) fn open_loaded(
    command: &str,
    name: &str,
    workload: &dyn Workload,
    options: &WorkloadOptions,
    db_config: &DbConfig,
    status: &Status,
) -> anyhow::Result<(Arc<Database>, Option<Duration>)> {
    check_log_switches(db_config, status)?;
    let Some(dir) = db_config.path.clone() else {
        let db = open(db_config)?;
        let took = load(workload, &db, options.scale, status)?;
        return Ok((db, Some(took)));
    };
    let took = match inspect_dir(&dir)? {
        Some(manifest) => {
            if let Some(why) = manifest.mismatch(name, options) {
                bail!(UsageError(format!(
                    "cannot {command} {name} in {}: {why}",
                    dir.display()
                )));
            }
            status.say(format_args!(
                "using the {} database in {} ({})",
                manifest.workload,
                dir.display(),
                describe_scale(&manifest.workload, manifest.scale)
            ));
            None
        }
        None => Some(load_into(name, workload, options, db_config, &dir, status)?),
    };
    // A loaded database is only found, never created: a missing file must not turn into a
    // fresh empty database over the remains of the old one.
    let db = open(&DbConfig {
        create: false,
        ..db_config.clone()
    })?;
    workload
        .create_schema(&db)
        .with_context(|| format!("find the {} schema", workload.name()))?;
    Ok((db, took))
}

/// What a database directory holds: `Some` manifest for a complete load, `None` when it is
/// absent or empty (a load may go there). Anything else — a file, or a directory with files but
/// no manifest — is a [`UsageError`] naming what was found, so nothing writes into data it does
/// not recognise.
pub fn inspect_dir(dir: &Path) -> anyhow::Result<Option<LoadManifest>> {
    if dir.exists() && !dir.is_dir() {
        bail!(UsageError(format!(
            "--db {}: it is a file, not a directory",
            dir.display()
        )));
    }
    if let Some(manifest) = LoadManifest::read(dir)? {
        return Ok(Some(manifest));
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("list directory {}", dir.display())),
    };
    let mut names = entries
        .map(|entry| entry.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<std::io::Result<Vec<_>>>()
        .with_context(|| format!("list directory {}", dir.display()))?;
    if names.is_empty() {
        return Ok(None);
    }
    names.sort();
    const SHOWN: usize = 6;
    let more = names.len().saturating_sub(SHOWN);
    names.truncate(SHOWN);
    let mut found = names.join(", ");
    if more > 0 {
        found.push_str(&format!(" and {more} more"));
    }
    bail!(UsageError(format!(
        "{} holds {found} but no {}: not a complete Glass load (an interrupted load, a lost \
         manifest, or other files), so nothing is written into it; use an empty or new \
         directory, or delete it",
        dir.display(),
        crate::manifest::MANIFEST_FILE
    )))
}

/// Refuses `--durable` where nothing can be forced, and warns (one line on stderr, even when
/// quiet) when a database on disk runs with a log switch off that a crash cannot recover from.
fn check_log_switches(db: &DbConfig, status: &Status) -> Result<(), UsageError> {
    let main_log = db.switches.is_on(engine::Switch::MainLog);
    let disk_log = db.switches.is_on(engine::Switch::DiskLog);
    if db.durable && !(main_log && disk_log) {
        let off = if main_log { "disk-log" } else { "main-log" };
        return Err(UsageError(format!(
            "--durable with --switch {off}=off: the log is never forced, so no commit could be \
             durable; drop --durable or the switch"
        )));
    }
    if let (Some(dir), Some(off)) = (
        &db.path,
        (!main_log)
            .then_some("main-log=off: nothing is logged")
            .or((!disk_log).then_some("disk-log=off: the log is never forced")),
    ) {
        status.warn(format_args!(
            "warning: --switch {off}, so a crash can leave the database in {} unrecoverable",
            dir.display()
        ));
    }
    Ok(())
}

/// Whether `path` can be written, tried before a run so that a bad `--json` fails at once:
/// an existing file is opened for appending (not changed), a new one created and removed.
pub(crate) fn check_writable(path: &Path) -> std::io::Result<()> {
    let existed = path.exists();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)?;
    if !existed {
        std::fs::remove_file(path)?;
    }
    Ok(())
}

/// Loads into directory `dir` (absent or empty: see [`inspect_dir`]), closes the database
/// cleanly, then writes the manifest.
fn load_into(
    name: &str,
    workload: &dyn Workload,
    options: &WorkloadOptions,
    db_config: &DbConfig,
    dir: &Path,
    status: &Status,
) -> anyhow::Result<Duration> {
    storage::file::create_dir_all_durably(dir)
        .with_context(|| format!("create directory {}", dir.display()))?;
    // A load needs no guard against torn pages, and pays for none: it counts only once it is
    // closed (every page synced) and its manifest written, and one cut short is loaded again.
    let db = open(&db_config.clone().without_torn_page_guard())?;
    let took = load(workload, &db, options.scale, status).with_context(|| {
        format!(
            "load into {} (it now holds a partial load: delete it before loading again)",
            dir.display()
        )
    })?;
    db.close()
        .with_context(|| format!("close the database in {}", dir.display()))?;
    LoadManifest::new(name, options, rfc3339_utc(SystemTime::now()))
        .write(dir)
        .with_context(|| format!("write the load manifest into {}", dir.display()))?;
    Ok(took)
}

/// `glass load`: creates and populates a database in `db.path`, then closes it.
pub fn run_load(
    workload_name: &str,
    options: &WorkloadOptions,
    db: &DbConfig,
    quiet: bool,
) -> anyhow::Result<Duration> {
    let status = Status::new(quiet);
    let Some(dir) = db.path.clone() else {
        bail!(UsageError("glass load needs --db DIR".into()));
    };
    crate::optimal::refuse_kernel(&db.switches, "glass load")?;
    validate_switches(&db.switches, db.threads.max(1))?;
    if let Some(manifest) = inspect_dir(&dir)? {
        bail!(UsageError(format!(
            "{} already holds a loaded {} database ({}); use another directory or delete it",
            dir.display(),
            manifest.workload,
            describe_scale(&manifest.workload, manifest.scale)
        )));
    }
    crate::capacity::check_machine(workload_name, options, db, true)?;
    let workload = build_workload(workload_name, options)?;
    load_into(workload_name, workload.as_ref(), options, db, &dir, &status)
}

/// Whether an error came from what the storage layer read (a page that failed its checksum
/// or header check, a page of the wrong kind or beyond the file), not from the OS.
fn is_page_damage(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        let storage = match cause.downcast_ref::<engine::TxError>() {
            Some(engine::TxError::Storage(s)) => Some(s),
            _ => cause.downcast_ref::<storage::StorageError>(),
        };
        matches!(
            storage,
            Some(storage::StorageError::Corruption { .. } | storage::StorageError::Invalid(_))
        )
    })
}

/// Most integrity faults `glass check` keeps (it counts the rest).
pub const CHECK_FAULT_LIMIT: usize = 1000;

/// What `glass check` found.
pub struct CheckOutcome {
    /// The integrity of what is on disk (pages, structures, indexes against tables).
    pub integrity: IntegrityReport,
    /// The workload's consistency conditions; `None` when integrity faults kept them from
    /// being evaluated (they would read damaged pages).
    pub conditions: Option<Vec<Condition>>,
    /// With an ack log: every receipt looked up (`None` without one, or when integrity
    /// faults kept them from being looked up).
    pub acks: Option<crate::acklog::AckReport>,
    /// What the open's recovery did (`None` when the database could not be opened).
    pub recovery: Option<engine::recovery::RecoveryReport>,
    /// The pages the check wrote back (what recovery changed) through the database's
    /// doublewrite file, its close's included; `None` where it had none.
    pub doublewrite: Option<storage::DoublewriteStats>,
}

impl CheckOutcome {
    /// Integrity clean, every condition holds, and no acknowledged durable commit is missing.
    pub fn passed(&self) -> bool {
        self.integrity.is_clean()
            && self
                .conditions
                .as_ref()
                .is_some_and(|c| c.iter().all(Condition::holds))
            && self
                .acks
                .as_ref()
                .is_none_or(crate::acklog::AckReport::holds)
    }
}

/// `glass check`: opens the database in `db.path` without creating anything (recovering it
/// if it was not closed cleanly), verifies its integrity and, if it is intact, evaluates the
/// workload's consistency conditions and looks up every receipt of `ack_log`.
pub fn run_check(
    workload_name: &str,
    db: &DbConfig,
    ack_log: Option<&Path>,
) -> anyhow::Result<CheckOutcome> {
    let Some(dir) = db.path.clone() else {
        bail!(UsageError("glass check needs --db DIR".into()));
    };
    let manifest = LoadManifest::read(&dir)?.ok_or_else(|| {
        UsageError(format!(
            "{} holds no loaded database (no {}): run `glass load {workload_name} --db {}` first",
            dir.display(),
            crate::manifest::MANIFEST_FILE,
            dir.display()
        ))
    })?;
    let options = manifest
        .options()
        .map_err(|e| anyhow::anyhow!("read the load manifest in {}: {e}", dir.display()))?;
    if let Some(why) = manifest.mismatch(workload_name, &options) {
        bail!(UsageError(format!(
            "cannot check {workload_name} in {}: {why}",
            dir.display()
        )));
    }
    let workload = build_workload(workload_name, &options)?;
    // A check creates nothing, a doublewrite file included. Where the database has one (every
    // database since it was last opened with one: a run's, not a load's), the pages its
    // recovery writes back go through it, so that a power loss during the check leaves none
    // torn beyond repair; where it has none, its changes log full-page images as a run's do.
    let db = match open(&DbConfig {
        create: false,
        doublewrite: if storage::doublewrite::holds_ring(
            &dir.join(storage::doublewrite::DOUBLEWRITE_FILE),
        ) {
            engine::Doublewrite::On
        } else {
            engine::Doublewrite::Off
        },
        ..db.clone()
    }) {
        Ok(db) => db,
        // A damaged page on the path of every open (a heap chain): verify the page file
        // alone, so that every damaged page is reported, not only the first the open met.
        Err(e) if is_page_damage(&e) => {
            let line = ProgressDrawer::new(false);
            let integrity = engine::integrity::verify_page_file(&dir, CHECK_FAULT_LIMIT, &|step| {
                line.draw_integrity(step)
            });
            line.finish();
            let mut integrity =
                integrity.with_context(|| format!("verify the page file in {}", dir.display()))?;
            integrity.add_first("database".into(), format!("cannot be opened: {e:#}"));
            return Ok(CheckOutcome {
                integrity,
                conditions: None,
                acks: None,
                recovery: None,
                doublewrite: None,
            });
        }
        Err(e) => return Err(e),
    };
    workload
        .create_schema(&db)
        .with_context(|| format!("find the {workload_name} schema"))?;
    let line = ProgressDrawer::new(false);
    let integrity =
        db.verify_integrity_with_progress(CHECK_FAULT_LIMIT, &|step| line.draw_integrity(step));
    line.finish();
    let conditions = if integrity.is_clean() {
        Some(check_consistency(workload.as_ref(), &db, false)?)
    } else {
        None
    };
    let acks = match ack_log {
        Some(path) if integrity.is_clean() => {
            Some(crate::acklog::verify(&db, workload_name, path)?)
        }
        _ => None,
    };
    let recovery = db.recovery();
    let doublewrite = db.doublewrite_counters();
    db.close()
        .with_context(|| format!("close the database in {}", dir.display()))?;
    Ok(CheckOutcome {
        integrity,
        conditions,
        acks,
        recovery,
        doublewrite: doublewrite.map(|c| c.stats()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_progress_names_the_table_its_rows_and_the_time() {
        let step = CheckStep {
            table: "order_line",
            rows: 12_345_678,
        };
        assert_eq!(
            progress_text(&step, Duration::from_millis(3_300)),
            "checking consistency: order_line, 12.3 M rows read  3.3 s"
        );
        let step = CheckStep {
            table: "warehouse",
            rows: 256,
        };
        assert_eq!(
            progress_text(&step, Duration::ZERO),
            "checking consistency: warehouse, 256 rows read  0.0 s"
        );
    }
}
