//! `glass scale`: how throughput grows with worker threads.
//!
//! A sweep runs `glass bench`'s machinery ([`run_bench`]) once per *point*: one configuration
//! at one thread count in one round. Every run is quiet; the sweep prints one status line per
//! point on stderr, since a sweep takes minutes.
//!
//! ```text
//!   validate: thread counts, configurations, switches at the most threads, the sizes of
//!             every point, of the durable databases kept at once and of a processes
//!             point's processes together, --json and --out
//!   for round in 1..=R                  interleaved: a slow spell of the machine falls on
//!     for configuration in the list     every point alike, not on one of them
//!       for threads in the list
//!         run_bench(the point, quiet) ─► BenchResult ─► one status line
//!         (processes: T copies of this command at once ─► T ProcessFigures)
//!   ─► a Point per (configuration, threads): median and range of txn/s over the rounds,
//!      speed-up and efficiency against the configuration's first thread count
//!   ─► a table per configuration (stdout), JSON (--json), scale-W.svg and .png (--out)
//! ```
//!
//! Ctrl-C or SIGTERM (with the handler `glass scale` installs: [`crate::driver::interrupt_flag`])
//! ends the point then running where it is and starts no other: that point, measured for only
//! part of its time, is left out, and the tables, JSON and figure cover the points run before
//! it, saying the sweep was interrupted ([`ScaleResult::interrupted`]). A `processes` point's
//! processes are sent SIGTERM and end their runs the same way.
//!
//! Configurations, one line of the figure each:
//!
//! | name          | workloads   | scale                                      | database |
//! |---------------|-------------|--------------------------------------------|----------|
//! | `partitioned` | tpcc, tpcb  | one warehouse (branch) per thread          | memory   |
//! | `shared`      | tpcc, tpcb  | `--shared-scale` (1), shared by all threads | memory  |
//! | `embedded`    | ycsb, voter | as given (`--scale`)                       | memory   |
//! | `durable`     | all four    | partitioned's (tpcc, tpcb), else as given  | disk, log forced at every commit |
//! | `processes`   | tpcc, tpcb  | one warehouse (branch) per *process*       | memory   |
//!
//! `processes` is measured only when named (`--configs partitioned,processes`): a point of T
//! "threads" is T processes of one thread each, each on a database of its own of one warehouse
//! (branch), started together; its throughput is their sum, its p50 and p99 the median of
//! theirs. They share nothing but the machine — its caches, memory bandwidth, hypervisor —,
//! so their line is what the machine allows this engine's footprint, beside which
//! `partitioned` shows what the threads of one process lose to each other (on a lent 16-core
//! machine: 12.75× one process at 16 against 10.1× for 16 threads; docs/performance.md,
//! "Eleventh pass"). Each is this program run again with the sweep's own arguments and two
//! hidden ones (`--process-seed`, `--process-out`), so it runs exactly the engine and
//! workload options the sweep was given; see [`run_process_point`]. Their loads take about a
//! second and differ by a fraction of one, which a warm-up of a second or more covers: the
//! measured windows overlap to within it.
//!
//! Partitioned terminals each have a home warehouse (branch) of their own, but the workloads
//! still reach across: TPC-C's remote New-Order items and Payments, TPC-B's 15% of accounts at
//! another branch. YCSB and Voter have no home to partition, so their scale stays as given.
//!
//! Durable databases live in a temporary directory (under `--dir`, or the system's), one
//! subdirectory per scale: each is loaded by its first point, reused by later points of the
//! same scale through `open_loaded` (the load manifest says it holds that load), deleted after
//! its last point, and the whole directory is removed at the end. With one round a scale's
//! points come one after another, so one database is on disk at a time; with several rounds
//! all are kept until the last round, and the up-front disk check counts them together.
//!
//! Speed-up is over the smallest thread count `t0` of the list (one thread by default):
//! `speed-up(t) = tps(t) / tps(t0)`, `efficiency(t) = speed-up(t) / (t / t0)`, and the linear
//! line is `tps(t0) × t / t0`. With several rounds each uses the medians.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::driver::Stop;
use crate::manifest::mix_name;
use crate::plot::{line_figure, Line, Lines};
use crate::report::{median, plural, rfc3339_utc, BenchResult};
use crate::run::{
    check_writable, describe_scale, run_bench, validate_switches, BenchConfig, Status, UsageError,
};

/// Most threads a point may run (as `glass bench --threads`).
pub const MAX_THREADS: usize = 4096;

/// How a point's database is arranged for its threads: one line of the figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Configuration {
    /// One warehouse (TPC-C) or branch (TPC-B) per thread, in memory.
    Partitioned,
    /// `--shared-scale` warehouses or branches shared by every thread, in memory.
    Shared,
    /// YCSB and Voter at the scale given, in memory (they have no home to partition).
    Embedded,
    /// On disk, the log forced at every commit; partitioned's scale, or as given.
    Durable,
    /// One process of one thread per warehouse (branch), started together, nothing shared
    /// but the machine; measured only when named.
    Processes,
}

impl Configuration {
    /// Every configuration, in the order of tables and legends.
    pub const ALL: [Configuration; 5] = [
        Configuration::Partitioned,
        Configuration::Shared,
        Configuration::Embedded,
        Configuration::Durable,
        Configuration::Processes,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Configuration::Partitioned => "partitioned",
            Configuration::Shared => "shared",
            Configuration::Embedded => "embedded",
            Configuration::Durable => "durable",
            Configuration::Processes => "processes",
        }
    }

    /// Whether this configuration means something for `workload`.
    pub fn applies_to(self, workload: &str) -> bool {
        let partitions = partitions(workload);
        match self {
            Configuration::Partitioned | Configuration::Shared | Configuration::Processes => {
                partitions
            }
            Configuration::Embedded => !partitions,
            Configuration::Durable => true,
        }
    }

    /// The configurations that apply to `workload`, in order.
    pub fn all_for(workload: &str) -> Vec<Configuration> {
        Configuration::ALL
            .into_iter()
            .filter(|c| c.applies_to(workload))
            .collect()
    }

    /// The default of `--configs`: every configuration that applies to `workload` but
    /// `processes`, which starts a process per thread and is measured only when named.
    pub fn default_for(workload: &str) -> Vec<Configuration> {
        Configuration::all_for(workload)
            .into_iter()
            .filter(|c| *c != Configuration::Processes)
            .collect()
    }

    /// The scale a point of this configuration runs at.
    pub fn scale(self, workload: &str, threads: usize, scales: Scales) -> u64 {
        match self {
            Configuration::Shared => scales.shared,
            // Each process's own database.
            Configuration::Processes => 1,
            Configuration::Partitioned | Configuration::Durable if partitions(workload) => {
                threads as u64
            }
            _ => scales.given,
        }
    }

    /// Whether its points run on disk with the log forced at every commit.
    pub fn durable(self) -> bool {
        self == Configuration::Durable
    }
}

/// Whether `workload` has homes to give each thread its own (warehouses, branches).
fn partitions(workload: &str) -> bool {
    matches!(workload, "tpcc" | "tpcb")
}

/// Parses `--configs`: names separated by commas, each applying to `workload`; returned in
/// [`Configuration::ALL`]'s order, each once.
pub fn parse_configurations(workload: &str, list: &str) -> Result<Vec<Configuration>, UsageError> {
    let valid = Configuration::all_for(workload)
        .iter()
        .map(|c| c.name())
        .collect::<Vec<_>>()
        .join(", ");
    let mut chosen = Vec::new();
    for name in list.split(',').map(str::trim) {
        let Some(configuration) = Configuration::ALL.into_iter().find(|c| c.name() == name) else {
            return Err(UsageError(format!(
                "--configs {list}: unknown configuration '{name}' (valid for {workload}: {valid})"
            )));
        };
        if !configuration.applies_to(workload) {
            let why = if partitions(workload) {
                "its scale follows the threads (partitioned) or --shared-scale (shared)"
            } else {
                "it has no warehouses or branches to give each thread, so its scale stays as given"
            };
            return Err(UsageError(format!(
                "--configs {list}: '{name}' does not apply to {workload}: {why} (valid for \
                 {workload}: {valid})"
            )));
        }
        chosen.push(configuration);
    }
    chosen.sort();
    chosen.dedup();
    Ok(chosen)
}

/// Parses `--threads`: thread counts separated by commas, each 1 to [`MAX_THREADS`]; returned
/// in increasing order, each once.
pub fn parse_threads(list: &str) -> Result<Vec<usize>, UsageError> {
    let mut counts = Vec::new();
    for item in list.split(',').map(str::trim) {
        let count = item.parse::<usize>().map_err(|_| {
            UsageError(format!(
                "--threads {list}: '{item}' is not a thread count (expected counts separated \
                 by commas, e.g. 1,2,4,8)"
            ))
        })?;
        if count == 0 {
            return Err(UsageError(format!(
                "--threads {list}: a thread count must be at least 1"
            )));
        }
        if count > MAX_THREADS {
            return Err(UsageError(format!(
                "--threads {list}: {count} is more than the {MAX_THREADS} threads a run may have"
            )));
        }
        counts.push(count);
    }
    counts.sort_unstable();
    counts.dedup();
    Ok(counts)
}

/// The default thread counts: 1, 2, 4, ... up to `cores`, and `cores` itself when it is not a
/// power of two.
pub fn default_threads(cores: usize) -> Vec<usize> {
    let cores = cores.clamp(1, MAX_THREADS);
    let mut counts: Vec<usize> = std::iter::successors(Some(1usize), |t| t.checked_mul(2))
        .take_while(|t| *t <= cores)
        .collect();
    if counts.last() != Some(&cores) {
        counts.push(cores);
    }
    counts
}

/// The cores this process may use (1 if unknown).
pub fn machine_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The scales a sweep's configurations draw on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scales {
    /// `--scale`: YCSB's and Voter's scale (unused by TPC-C and TPC-B, whose configurations
    /// set their own).
    pub given: u64,
    /// `--shared-scale`: the `shared` configuration's warehouses or branches.
    pub shared: u64,
}

impl Scales {
    /// Resolves `--scale` and `--shared-scale` for `workload` and `configurations`, refusing
    /// a flag that would be ignored: `--scale` with TPC-C or TPC-B (each configuration sets
    /// the scale), `--shared-scale` without the `shared` configuration.
    pub fn resolve(
        workload: &str,
        configurations: &[Configuration],
        scale: Option<u64>,
        shared_scale: Option<u64>,
    ) -> Result<Scales, UsageError> {
        if let (Some(n), true) = (scale, partitions(workload)) {
            return Err(UsageError(format!(
                "--scale {n}: glass scale {workload} sets the scale per configuration \
                 (partitioned and durable: one per thread; shared: --shared-scale)"
            )));
        }
        if let (Some(n), false) = (
            shared_scale,
            configurations.contains(&Configuration::Shared),
        ) {
            return Err(UsageError(format!(
                "--shared-scale {n}: only the shared configuration uses it, and it is not \
                 measured here (--configs)"
            )));
        }
        let default = crate::run::default_scale(workload);
        Ok(Scales {
            given: scale.unwrap_or(default),
            shared: shared_scale.unwrap_or(default),
        })
    }
}

/// Everything `glass scale` needs.
#[derive(Clone, Debug)]
pub struct ScaleConfig {
    /// What every point shares: workload and its options (mix, YCSB shape), duration,
    /// warm-up, engine (switches, pool), seed. Each point sets its own threads, scale,
    /// directory and durability, and runs quiet, one round, without `json` or `ack_log`.
    pub base: BenchConfig,
    /// Thread counts, increasing.
    pub threads: Vec<usize>,
    /// Configurations, in [`Configuration::ALL`]'s order.
    pub configurations: Vec<Configuration>,
    pub scales: Scales,
    /// Rounds; each measures every point once.
    pub rounds: u32,
    /// Where the durable configuration's temporary directory goes (default: the system's).
    pub dir: Option<PathBuf>,
    /// Directory of the figures.
    pub out: PathBuf,
    /// Also write every point as JSON here.
    pub json: Option<PathBuf>,
    /// The command line, recorded in the JSON.
    pub command_line: String,
    /// The machine's cores, recorded in the JSON and the figure's title.
    pub cores: usize,
    /// The arguments (the program's name left out) that run this sweep again: each process of
    /// a `processes` point is this program run with them and `--process-seed S
    /// --process-out FILE`, and runs [`run_process_point`]. Empty: `processes` is refused.
    pub process_args: Vec<std::ffi::OsString>,
}

/// The median and range of some measurements.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Spread {
    pub median: f64,
    pub low: f64,
    pub high: f64,
}

impl Spread {
    /// Of `values` (all 0 for none).
    pub fn of(values: &[f64]) -> Spread {
        let finite = || values.iter().copied().filter(|v| v.is_finite());
        if finite().next().is_none() {
            return Spread {
                median: 0.0,
                low: 0.0,
                high: 0.0,
            };
        }
        Spread {
            median: median(&finite().collect::<Vec<_>>()),
            low: finite().fold(f64::INFINITY, f64::min),
            high: finite().fold(f64::NEG_INFINITY, f64::max),
        }
    }
}

/// Speed-up of `tps` at `threads` over `base_tps` at `base_threads`, and efficiency (the
/// speed-up divided by the growth in threads); both 0 when the base measured nothing.
pub fn speedup(tps: f64, threads: usize, base_tps: f64, base_threads: usize) -> (f64, f64) {
    if base_tps <= 0.0 || base_threads == 0 || threads == 0 {
        return (0.0, 0.0);
    }
    let speedup = tps / base_tps;
    (speedup, speedup * base_threads as f64 / threads as f64)
}

/// One configuration at one thread count, over every round.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    pub config: String,
    pub threads: usize,
    pub scale: u64,
    pub durable: bool,
    /// Transactions per second: the median over the rounds, and the range.
    pub tps: f64,
    pub tps_low: f64,
    pub tps_high: f64,
    /// Over the configuration's smallest thread count (see the module's header).
    pub speedup: f64,
    pub efficiency: f64,
    /// The linear line here: the base point's throughput times the growth in threads.
    pub linear_tps: f64,
    /// Medians over the rounds.
    pub p50_us: u64,
    pub p99_us: u64,
    /// Retried aborts per second (median over the rounds).
    pub aborts_per_s: f64,
    /// The log's forces per commit and commits per forced group (median over the rounds,
    /// warm-up included); `None` when the log forced nothing.
    pub forces_per_commit: Option<f64>,
    pub commits_per_batch: Option<f64>,
    /// Mean µs a force's leader gathered committers (median over the rounds).
    pub gather_us_per_force: Option<f64>,
    /// `"ok"`, or the first round's failed conditions.
    pub consistency: String,
    /// Rounds measured: the sweep's rounds, or fewer where Ctrl-C ended it first.
    pub rounds: usize,
    /// Each round's whole result (none for `processes`, whose rounds are in `processes`).
    pub runs: Vec<BenchResult>,
    /// `processes`: each round's processes, each one's own figures.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<Vec<ProcessFigures>>,
}

/// What one process of a `processes` point measured (written by [`run_process_point`] as
/// JSON, read back by the sweep).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProcessFigures {
    pub tps: f64,
    pub txn_count: u64,
    pub aborts: u64,
    pub duration_s: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    /// Seconds its load took.
    pub load_s: Option<f64>,
    /// `"ok"`, or the failed conditions.
    pub consistency: String,
}

impl ProcessFigures {
    fn of(result: &BenchResult) -> ProcessFigures {
        ProcessFigures {
            tps: result.tps,
            txn_count: result.txn_count,
            aborts: result.aborts,
            duration_s: result.duration_s,
            p50_us: result.p50_us,
            p99_us: result.p99_us,
            load_s: result.config.load_s,
            consistency: result.consistency.clone(),
        }
    }
}

/// One point's run in one round: a run of `glass bench`'s machinery, or the processes of a
/// `processes` point.
#[derive(Clone, Debug)]
enum Run {
    Bench(Box<BenchResult>),
    Processes(Vec<ProcessFigures>),
}

/// What [`summarize`] takes from a round: a run's own figures, or its processes' together.
struct RoundFigures<'a> {
    tps: f64,
    p50_us: u64,
    p99_us: u64,
    aborts_per_s: f64,
    log: Option<crate::report::LogSummary>,
    consistency: &'a str,
}

impl Run {
    fn figures(&self) -> RoundFigures<'_> {
        let per_second = |aborts: u64, secs: f64| {
            if secs > 0.0 {
                aborts as f64 / secs
            } else {
                0.0
            }
        };
        match self {
            Run::Bench(r) => RoundFigures {
                tps: r.tps,
                p50_us: r.p50_us,
                p99_us: r.p99_us,
                aborts_per_s: per_second(r.aborts, r.duration_s),
                log: r.log,
                consistency: &r.consistency,
            },
            Run::Processes(each) => {
                let median_of = |f: &dyn Fn(&ProcessFigures) -> f64| {
                    median(&each.iter().map(f).collect::<Vec<_>>())
                };
                RoundFigures {
                    tps: each.iter().map(|p| p.tps).sum(),
                    p50_us: median_of(&|p| p.p50_us as f64).round() as u64,
                    p99_us: median_of(&|p| p.p99_us as f64).round() as u64,
                    aborts_per_s: each
                        .iter()
                        .map(|p| per_second(p.aborts, p.duration_s))
                        .sum(),
                    log: None,
                    consistency: each
                        .iter()
                        .map(|p| p.consistency.as_str())
                        .find(|c| *c != "ok")
                        .unwrap_or("ok"),
                }
            }
        }
    }
}

/// What a sweep measured: every point, and what it ran on.
#[derive(Clone, Debug, Serialize)]
pub struct ScaleResult {
    pub command: String,
    pub cores: usize,
    /// How the machine's idle CPUs wait (`crate::cpu_idle`): a sweep's threads sleep and
    /// wake, and pay for it.
    pub cpu_idle: crate::cpu_idle::CpuIdle,
    pub glass_version: String,
    pub timestamp: String,
    pub workload: String,
    pub mix: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ycsb_workload: Option<String>,
    pub preset: String,
    /// Switches that are off.
    pub switches: Vec<String>,
    pub duration_s: f64,
    pub warmup_s: f64,
    pub rounds: u32,
    pub seed: u64,
    pub pool_mib: usize,
    pub threads: Vec<usize>,
    pub configs: Vec<String>,
    /// Configuration by configuration, thread count by thread count.
    pub points: Vec<Point>,
    /// The figures written (SVG and PNG); empty when they were skipped.
    pub figures: Vec<String>,
    pub wall_s: f64,
    /// Ended early by Ctrl-C or SIGTERM: the points above are those run before it.
    pub interrupted: bool,
    /// Points run to their end, of the points planned (configurations × threads × rounds).
    pub points_run: usize,
    pub points_planned: usize,
}

/// One run of the sweep, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Step {
    round: u32,
    configuration: Configuration,
    threads: usize,
}

impl ScaleConfig {
    fn steps(&self) -> Vec<Step> {
        let mut steps = Vec::new();
        for round in 0..self.rounds {
            for &configuration in &self.configurations {
                for &threads in &self.threads {
                    steps.push(Step {
                        round,
                        configuration,
                        threads,
                    });
                }
            }
        }
        steps
    }

    fn scale_of(&self, configuration: Configuration, threads: usize) -> u64 {
        configuration.scale(&self.base.workload, threads, self.scales)
    }

    /// The run of `step`; a durable one's database is `durable_dir/W-scale-N`.
    fn bench_config(&self, step: Step, durable_dir: &Path) -> BenchConfig {
        let mut config = self.base.clone();
        // A `processes` point's run is each of its processes': one thread.
        config.threads = match step.configuration {
            Configuration::Processes => 1,
            _ => step.threads,
        };
        config.options.scale = self.scale_of(step.configuration, step.threads);
        // As `glass bench --rounds`: no two rounds repeat a terminal's stream.
        config.seed = self
            .base
            .seed
            .wrapping_add(u64::from(step.round) * step.threads as u64);
        config.rounds = 1;
        config.json = None;
        config.ack_log = None;
        config.quiet = true;
        config.adopt_loaded_scale = false;
        config.db.durable = step.configuration.durable();
        config.db.path = step.configuration.durable().then(|| {
            durable_dir.join(format!(
                "{}-scale-{}",
                self.base.workload, config.options.scale
            ))
        });
        config
    }

    /// Refuses, before anything runs, what would fail a point later.
    fn validate(&self, durable_dir: &Path) -> anyhow::Result<()> {
        let (Some(&fewest), Some(&most)) = (self.threads.first(), self.threads.last()) else {
            anyhow::bail!(UsageError("--threads: no thread count given".into()));
        };
        // Increasing: the first count is the base of every speed-up (see `parse_threads`).
        if !self.threads.windows(2).all(|w| w[0] < w[1]) {
            anyhow::bail!(UsageError(
                "--threads: thread counts must be given in increasing order, each once".into()
            ));
        }
        if fewest == 0 || most > MAX_THREADS {
            anyhow::bail!(UsageError(format!(
                "--threads: counts must lie from 1 to {MAX_THREADS}"
            )));
        }
        if self.configurations.is_empty() {
            anyhow::bail!(UsageError("--configs: no configuration given".into()));
        }
        if let Some(c) = self
            .configurations
            .iter()
            .find(|c| !c.applies_to(&self.base.workload))
        {
            anyhow::bail!(UsageError(format!(
                "--configs: '{}' does not apply to {}",
                c.name(),
                self.base.workload
            )));
        }
        if self.rounds == 0 {
            anyhow::bail!(UsageError("--rounds must be at least 1".into()));
        }
        if self.configurations.contains(&Configuration::Processes) && self.process_args.is_empty() {
            anyhow::bail!(UsageError(
                "--configs processes: this sweep was not given the arguments that start its \
                 processes (ScaleConfig::process_args)"
                    .into()
            ));
        }
        let switches = &self.base.db.switches;
        if switches.optimal {
            anyhow::bail!(UsageError(
                "--preset optimal: the kernel runs on one thread only, so there is nothing to \
                 scale (use glass bench tpcc --mix paper --preset optimal --threads 1)"
                    .into()
            ));
        }
        validate_switches(switches, most)?;
        if let Stop::Duration(d) = self.base.stop {
            if d.is_zero() {
                anyhow::bail!(UsageError("--duration must be more than 0 seconds".into()));
            }
        }
        if self.configurations.contains(&Configuration::Durable) {
            let off = [engine::Switch::MainLog, engine::Switch::DiskLog]
                .into_iter()
                .find(|s| !switches.is_on(*s));
            if let Some(off) = off {
                anyhow::bail!(UsageError(format!(
                    "--switch {}=off: the log is never forced, so the durable configuration                      cannot run; leave durable out of --configs or drop the switch",
                    off.name()
                )));
            }
        }
        let mut durable_scales = Vec::new();
        for &configuration in &self.configurations {
            for &threads in &self.threads {
                let step = Step {
                    round: 0,
                    configuration,
                    threads,
                };
                let config = self.bench_config(step, durable_dir);
                crate::capacity::check_machine(&config.workload, &config.options, &config.db, true)
                    .map_err(|e| {
                        UsageError(format!(
                            "{} at {threads} thread{}: {e}",
                            configuration.name(),
                            plural(threads)
                        ))
                    })?;
                if configuration.durable() {
                    durable_scales.push(config.options.scale);
                }
                if configuration == Configuration::Processes && threads > 1 {
                    // The processes run at once: their pools and pages add up.
                    let pool = match config.db.pool_mib {
                        0 => crate::capacity::default_pool_mib(
                            &config.workload,
                            &config.options,
                            &config.db,
                            config.run_length(),
                        ),
                        given => given,
                    };
                    let mut all = config.clone();
                    all.options.scale = threads as u64;
                    all.db.pool_mib = pool.saturating_mul(threads);
                    crate::capacity::check_machine(&all.workload, &all.options, &all.db, true)
                        .map_err(|e| {
                            UsageError(format!(
                                "processes at {threads} threads: {threads} processes of a \
                                 {pool} MiB pool each, together: {e}"
                            ))
                        })?;
                }
            }
        }
        durable_scales.sort_unstable();
        durable_scales.dedup();
        if self.rounds > 1 && durable_scales.len() > 1 {
            // Every durable database is kept until the last round: their disk adds up.
            let total: u64 = durable_scales.iter().sum();
            let mut all = self.base.clone();
            all.options.scale = total;
            all.db.path = Some(durable_dir.to_path_buf());
            crate::capacity::check_machine(&all.workload, &all.options, &all.db, true).map_err(
                |e| {
                    UsageError(format!(
                        "durable with --rounds {}: its {} databases (scale {total} in all) are \
                         kept until the last round: {e}",
                        self.rounds,
                        durable_scales.len()
                    ))
                },
            )?;
        }
        // The figures' directory first: the JSON may go into it.
        std::fs::create_dir_all(&self.out).map_err(|e| {
            UsageError(format!(
                "--out {}: cannot create it: {e}",
                self.out.display()
            ))
        })?;
        if let Some(path) = &self.json {
            check_writable(path).map_err(|e| {
                UsageError(format!("--json {}: cannot write it: {e}", path.display()))
            })?;
        }
        Ok(())
    }
}

/// Runs the sweep `config` describes; see the module's header.
pub fn run_scale(config: &ScaleConfig) -> anyhow::Result<ScaleResult> {
    let started = Instant::now();
    let timestamp = rfc3339_utc(SystemTime::now());
    let status = Status::new(false);
    let parent = match &config.dir {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir(),
    };
    // Checked with a name under the parent: its disk is where the databases would go.
    config.validate(&parent.join("glass-scale"))?;
    let durable_dir = if config.configurations.iter().any(|c| c.durable()) {
        std::fs::create_dir_all(&parent)
            .with_context(|| format!("create directory {}", parent.display()))?;
        Some(
            tempfile::Builder::new()
                .prefix("glass-scale-")
                .tempdir_in(&parent)
                .with_context(|| format!("create a temporary directory in {}", parent.display()))?,
        )
    } else {
        None
    };
    let durable_path = durable_dir
        .as_ref()
        .map_or_else(|| parent.clone(), |d| d.path().to_path_buf());

    let steps = config.steps();
    let per_point_s = config.base.warmup.as_secs_f64()
        + match config.base.stop {
            Stop::Duration(d) => d.as_secs_f64(),
            Stop::Txns(_) => 0.0,
        };
    status.say(format_args!(
        "glass scale {}: {} points ({} configuration{} × {} thread count{} × {} round{}) of \
         {} s warm-up and {} s each: about {:.0} s plus loads",
        config.base.workload,
        steps.len(),
        config.configurations.len(),
        plural(config.configurations.len()),
        config.threads.len(),
        plural(config.threads.len()),
        config.rounds,
        plural(config.rounds as usize),
        config.base.warmup.as_secs_f64(),
        per_point_s - config.base.warmup.as_secs_f64(),
        per_point_s * steps.len() as f64
    ));

    let mut runs: Vec<((Configuration, usize), Run)> = Vec::with_capacity(steps.len());
    let mut interrupted = false;
    for (i, &step) in steps.iter().enumerate() {
        if crate::driver::interrupted() {
            interrupted = true;
            break;
        }
        let bench = config.bench_config(step, &durable_path);
        let point_started = Instant::now();
        let what = || {
            format!(
                "{} at {} thread{}, round {}",
                step.configuration.name(),
                step.threads,
                plural(step.threads),
                step.round + 1
            )
        };
        let ran = match step.configuration {
            Configuration::Processes => {
                run_processes(config, step).with_context(what)?.map(|each| {
                    let slowest = each.iter().filter_map(|p| p.load_s).reduce(f64::max);
                    (Run::Processes(each), slowest)
                })
            }
            _ => match run_bench(&bench) {
                Ok(result) if result.interrupted => None,
                Ok(result) => {
                    let load_s = result.config.load_s;
                    Some((Run::Bench(Box::new(result)), load_s))
                }
                Err(e) if crate::driver::is_interruption(&e) => None,
                Err(e) => return Err(e.context(what())),
            },
        };
        // Interrupted: this point ran for part of its time and is left out; the durable
        // directory, removed below, takes its database with it.
        let Some((run, load_s)) = ran else {
            status.say(format_args!(
                "[{}/{}] interrupted: {} at {} thread{}, round {}, left out; {} point{} measured",
                i + 1,
                steps.len(),
                step.configuration.name(),
                step.threads,
                plural(step.threads),
                step.round + 1,
                runs.len(),
                plural(runs.len())
            ));
            interrupted = true;
            break;
        };
        let figures = run.figures();
        let loaded = load_s
            .map(|s| format!(", loaded in {s:.1} s"))
            .unwrap_or_default();
        let consistency = if figures.consistency == "ok" {
            String::new()
        } else {
            format!(", consistency {}", figures.consistency)
        };
        status.say(format_args!(
            "[{}/{}] {} {} at {} thread{} (scale {}), round {} of {}: {:.0} txn/s, p99 {} µs{loaded}, \
             {:.1} s{consistency}",
            i + 1,
            steps.len(),
            config.base.workload,
            step.configuration.name(),
            step.threads,
            plural(step.threads),
            bench.options.scale,
            step.round + 1,
            config.rounds,
            figures.tps,
            figures.p99_us,
            point_started.elapsed().as_secs_f64()
        ));
        // A durable database no later step uses is deleted now, so that one round keeps one
        // database on disk at a time.
        if let Some(path) = &bench.db.path {
            let used_later = steps[i + 1..]
                .iter()
                .any(|later| config.bench_config(*later, &durable_path).db.path == bench.db.path);
            if !used_later {
                std::fs::remove_dir_all(path)
                    .with_context(|| format!("remove the database in {}", path.display()))?;
            }
        }
        runs.push(((step.configuration, step.threads), run));
    }
    drop(durable_dir);

    let points_run = runs.len();
    let points = summarize(config, runs);
    let mut result = ScaleResult {
        command: config.command_line.clone(),
        cores: config.cores,
        cpu_idle: crate::cpu_idle::CpuIdle::probe(),
        glass_version: env!("CARGO_PKG_VERSION").to_string(),
        timestamp,
        workload: config.base.workload.clone(),
        mix: mix_name(config.base.options.mix).to_string(),
        ycsb_workload: (config.base.workload == "ycsb")
            .then(|| config.base.options.ycsb_workload.to_string()),
        preset: config
            .base
            .db
            .switches
            .preset_name()
            .unwrap_or("custom")
            .to_string(),
        switches: config
            .base
            .db
            .switches
            .off_names()
            .iter()
            .map(|s| s.to_string())
            .collect(),
        duration_s: match config.base.stop {
            Stop::Duration(d) => d.as_secs_f64(),
            Stop::Txns(_) => 0.0,
        },
        warmup_s: config.base.warmup.as_secs_f64(),
        rounds: config.rounds,
        seed: config.base.seed,
        pool_mib: config.base.db.pool_mib,
        threads: config.threads.clone(),
        configs: config
            .configurations
            .iter()
            .map(|c| c.name().to_string())
            .collect(),
        points,
        figures: Vec::new(),
        wall_s: 0.0,
        interrupted,
        points_run,
        points_planned: steps.len(),
    };
    let name = format!("scale-{}", config.base.workload);
    // Interrupted before its first point ended, a sweep has no line to draw.
    if !result.points.is_empty() && line_figure(&result.figure(), &config.out, &name)? {
        result.figures = ["svg", "png"]
            .iter()
            .map(|ext| {
                config
                    .out
                    .join(format!("{name}.{ext}"))
                    .display()
                    .to_string()
            })
            .collect();
    }
    result.wall_s = started.elapsed().as_secs_f64();
    if let Some(path) = &config.json {
        let text = serde_json::to_string_pretty(&result).context("serialise the sweep")?;
        std::fs::write(path, text + "\n")
            .with_context(|| format!("write results to {}", path.display()))?;
    }
    Ok(result)
}

/// Runs the processes of a `processes` point: `step.threads` copies of this program, started
/// together, each given the sweep's own arguments and its terminal's seed (as thread *i* of a
/// `partitioned` point draws from), each writing its figures to a file of a temporary
/// directory. Fails naming the first process that failed, with the end of what it printed.
///
/// Each is owned by the sweep ([`crate::child::owned`]): in a process group of its own, and
/// killed should the sweep die. Interrupted ([`crate::driver::interrupted`]), the sweep sends
/// each SIGTERM, which ends its run as Ctrl-C ends a bench's, waits for all, and returns
/// `None`: the point is not measured.
fn run_processes(config: &ScaleConfig, step: Step) -> anyhow::Result<Option<Vec<ProcessFigures>>> {
    let exe = std::env::current_exe().context("find this program, to start its processes")?;
    let dir = tempfile::Builder::new()
        .prefix("glass-processes-")
        .tempdir()
        .context("create a temporary directory for the processes' figures")?;
    let mut children = Vec::with_capacity(step.threads);
    for i in 0..step.threads {
        let out = dir.path().join(format!("process-{i}.json"));
        let err = dir.path().join(format!("process-{i}.err"));
        let seed = config
            .base
            .seed
            .wrapping_add(u64::from(step.round) * step.threads as u64)
            .wrapping_add(i as u64);
        let stderr =
            std::fs::File::create(&err).with_context(|| format!("create {}", err.display()))?;
        let child = crate::child::owned(&mut std::process::Command::new(&exe), libc::SIGKILL)
            .args(&config.process_args)
            .arg("--process-seed")
            .arg(seed.to_string())
            .arg("--process-out")
            .arg(&out)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("start process {} of {}", i + 1, step.threads))?;
        children.push((child, out, err));
    }
    // Every child is waited for, failed or not, so that none outlives the sweep; an
    // interruption is passed on to those still running.
    let mut finished: Vec<Option<std::io::Result<std::process::ExitStatus>>> =
        (0..children.len()).map(|_| None).collect();
    let mut passed_on = false;
    while finished.iter().any(Option::is_none) {
        if crate::driver::interrupted() && !passed_on {
            for ((child, _, _), done) in children.iter().zip(&finished) {
                if done.is_none() {
                    crate::child::signal(child.id(), libc::SIGTERM);
                }
            }
            passed_on = true;
        }
        for ((child, _, _), done) in children.iter_mut().zip(finished.iter_mut()) {
            if done.is_none() {
                *done = child.try_wait().transpose();
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    if passed_on {
        return Ok(None);
    }
    let mut figures = Vec::with_capacity(children.len());
    let mut failed = None;
    for (i, ((_, out, err), finished)) in children.into_iter().zip(finished).enumerate() {
        let finished = finished.expect("every child was waited for");
        if failed.is_some() {
            continue;
        }
        let outcome = match finished {
            Err(e) => Err(format!("waiting for it: {e}")),
            Ok(status) if !status.success() => {
                let printed = std::fs::read_to_string(&err).unwrap_or_default();
                let lines: Vec<&str> = printed.lines().collect();
                let tail = lines[lines.len().saturating_sub(5)..].join(" / ");
                Err(format!("failed ({status}): {tail}"))
            }
            Ok(_) => std::fs::read_to_string(&out)
                .map_err(|e| format!("reading {}: {e}", out.display()))
                .and_then(|text| {
                    serde_json::from_str(&text)
                        .map_err(|e| format!("parsing {}: {e}", out.display()))
                }),
        };
        match outcome {
            Ok(f) => figures.push(f),
            Err(why) => failed = Some(format!("process {} of {}: {why}", i + 1, step.threads)),
        }
    }
    match failed {
        Some(why) => Err(anyhow::anyhow!(why)),
        None => Ok(Some(figures)),
    }
}

/// One process of a `processes` point (what `glass scale … --process-seed S --process-out
/// FILE` runs): the point's run on one thread and one warehouse (branch), its terminal drawing
/// from `seed`, its figures written to `out` as JSON ([`ProcessFigures`]). Nothing else of the
/// sweep runs: no other point, table, figure or `--json`.
pub fn run_process_point(config: &ScaleConfig, seed: u64, out: &Path) -> anyhow::Result<()> {
    let step = Step {
        round: 0,
        configuration: Configuration::Processes,
        threads: 1,
    };
    let mut bench = config.bench_config(step, Path::new("unused"));
    bench.seed = seed;
    let result = run_bench(&bench)?;
    let text = serde_json::to_string(&ProcessFigures::of(&result)).context("serialise")?;
    std::fs::write(out, text).with_context(|| format!("write {}", out.display()))
}

/// Gathers each (configuration, threads)'s rounds into a [`Point`].
fn summarize(config: &ScaleConfig, runs: Vec<((Configuration, usize), Run)>) -> Vec<Point> {
    let mut points = Vec::new();
    for &configuration in &config.configurations {
        let mut base: Option<(usize, f64)> = None;
        for &threads in &config.threads {
            let rounds: Vec<&Run> = runs
                .iter()
                .filter(|(key, _)| *key == (configuration, threads))
                .map(|(_, r)| r)
                .collect();
            // Not reached before an interruption.
            if rounds.is_empty() {
                continue;
            }
            let figures: Vec<RoundFigures<'_>> = rounds.iter().map(|r| r.figures()).collect();
            let of = |f: &dyn Fn(&RoundFigures<'_>) -> f64| {
                Spread::of(&figures.iter().map(f).collect::<Vec<_>>())
            };
            let tps = of(&|r| r.tps);
            let (base_threads, base_tps) = *base.get_or_insert((threads, tps.median));
            let (speedup, efficiency) = speedup(tps.median, threads, base_tps, base_threads);
            // Forces counted as group commit only where commits asked for them.
            let logs: Vec<_> = figures
                .iter()
                .filter_map(|r| {
                    r.log
                        .filter(|l| l.forces > 0 && l.forces_per_commit.is_some())
                })
                .collect();
            let log_median = |f: &dyn Fn(&crate::report::LogSummary) -> f64| {
                (!logs.is_empty()).then(|| median(&logs.iter().map(f).collect::<Vec<_>>()))
            };
            let consistency = figures
                .iter()
                .map(|r| r.consistency)
                .find(|c| *c != "ok")
                .unwrap_or("ok")
                .to_string();
            points.push(Point {
                config: configuration.name().to_string(),
                threads,
                scale: config.scale_of(configuration, threads),
                durable: configuration.durable(),
                tps: tps.median,
                tps_low: tps.low,
                tps_high: tps.high,
                speedup,
                efficiency,
                linear_tps: base_tps * threads as f64 / base_threads as f64,
                p50_us: of(&|r| r.p50_us as f64).median.round() as u64,
                p99_us: of(&|r| r.p99_us as f64).median.round() as u64,
                aborts_per_s: of(&|r| r.aborts_per_s).median,
                forces_per_commit: log_median(&|l| l.forces_per_commit.unwrap_or_default()),
                commits_per_batch: log_median(&|l| l.commits_per_batch.unwrap_or_default()),
                gather_us_per_force: log_median(&|l| l.gather_us_per_force),
                consistency,
                rounds: rounds.len(),
                runs: rounds
                    .iter()
                    .filter_map(|r| match r {
                        Run::Bench(result) => Some((**result).clone()),
                        Run::Processes(_) => None,
                    })
                    .collect(),
                processes: rounds
                    .iter()
                    .filter_map(|r| match r {
                        Run::Processes(each) => Some(each.clone()),
                        Run::Bench(_) => None,
                    })
                    .collect(),
            });
        }
    }
    points
}

/// A workload's name as its specification writes it.
fn display_name(workload: &str) -> &str {
    match workload {
        "tpcc" => "TPC-C",
        "tpcb" => "TPC-B",
        "ycsb" => "YCSB",
        "voter" => "Voter",
        other => other,
    }
}

impl ScaleResult {
    /// Whether every run's consistency conditions held.
    pub fn consistent(&self) -> bool {
        self.points.iter().all(|p| p.consistency == "ok")
    }

    fn points_of<'a>(&'a self, config: &'a str) -> impl Iterator<Item = &'a Point> + 'a {
        self.points.iter().filter(move |p| p.config == config)
    }

    /// The workload as the title and tables name it, e.g. "TPC-C (mix paper)".
    fn workload_title(&self) -> String {
        let name = display_name(&self.workload);
        match (self.workload.as_str(), &self.ycsb_workload) {
            ("tpcc", _) => format!("{name} (mix {})", self.mix),
            (_, Some(letter)) => format!("{name}-{letter}"),
            _ => name.to_string(),
        }
    }

    /// The figure: per configuration, throughput against threads and its linear line.
    pub fn figure(&self) -> Lines {
        let mut lines = Vec::new();
        for name in &self.configs {
            let color = Configuration::ALL
                .iter()
                .position(|c| c.name() == name)
                .unwrap_or(0);
            let points: Vec<&Point> = self.points_of(name).collect();
            lines.push(Line {
                name: name.clone(),
                points: points.iter().map(|p| (p.threads as f64, p.tps)).collect(),
                ranges: if self.rounds > 1 {
                    points.iter().map(|p| (p.tps_low, p.tps_high)).collect()
                } else {
                    Vec::new()
                },
                color,
                dashed: false,
            });
            lines.push(Line {
                name: format!("linear ({name})"),
                points: points
                    .iter()
                    .map(|p| (p.threads as f64, p.linear_tps))
                    .collect(),
                ranges: Vec::new(),
                color,
                dashed: true,
            });
        }
        let switches = if self.switches.is_empty() {
            String::new()
        } else {
            format!(", switches off: {}", self.switches.join(","))
        };
        Lines {
            title: format!(
                "{} throughput against threads — preset {}{switches}, {} core{}",
                self.workload_title(),
                self.preset,
                self.cores,
                plural(self.cores)
            ),
            x_label: "worker threads".to_string(),
            y_label: "transactions per second".to_string(),
            lines,
        }
    }

    /// A table per configuration: threads, txn/s (and its range over several rounds),
    /// speed-up, efficiency, p50 and p99, aborts per second, and on disk the log's forces per
    /// commit and commits per forced group.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let ranges = self.rounds > 1;
        for name in &self.configs {
            let points: Vec<&Point> = self.points_of(name).collect();
            let Some(first) = points.first() else {
                continue;
            };
            let log = points.iter().any(|p| p.forces_per_commit.is_some());
            let median = if ranges {
                format!(", medians of {} rounds", self.rounds)
            } else {
                String::new()
            };
            let description = Configuration::ALL
                .iter()
                .find(|c| c.name() == name)
                .map(|c| describe_point(*c, &self.workload, first))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "{} {name}: {description} (speed-up over {} thread{}{median})",
                self.workload_title(),
                first.threads,
                plural(first.threads)
            );
            let mut header = format!("{:>7} {:>10}", "threads", "txn/s");
            if ranges {
                let _ = write!(header, " {:>17}", "range");
            }
            let _ = write!(
                header,
                " {:>8} {:>10} {:>8} {:>8} {:>9}",
                "speed-up", "efficiency", "p50 µs", "p99 µs", "aborts/s"
            );
            if log {
                let _ = write!(
                    header,
                    " {:>13} {:>13} {:>10}",
                    "forces/commit", "commits/group", "gather µs"
                );
            }
            let width = header.chars().count();
            let _ = writeln!(out, "{header}");
            let _ = writeln!(out, "{}", "─".repeat(width));
            for p in &points {
                let mut row = format!("{:>7} {:>10.1}", p.threads, p.tps);
                if ranges {
                    let _ = write!(
                        row,
                        " {:>17}",
                        format!("{:.0}–{:.0}", p.tps_low, p.tps_high)
                    );
                }
                let _ = write!(
                    row,
                    " {:>8.2} {:>9.0}% {:>8} {:>8} {:>9.1}",
                    p.speedup,
                    p.efficiency * 100.0,
                    p.p50_us,
                    p.p99_us,
                    p.aborts_per_s
                );
                if log {
                    let cell = |v: Option<f64>, decimals: usize| {
                        v.map_or("—".to_string(), |v| format!("{v:.decimals$}"))
                    };
                    let _ = write!(
                        row,
                        " {:>13} {:>13} {:>10}",
                        cell(p.forces_per_commit, 3),
                        cell(p.commits_per_batch, 1),
                        cell(p.gather_us_per_force, 1)
                    );
                }
                if p.consistency != "ok" {
                    let _ = write!(row, "  consistency {}", p.consistency);
                }
                if p.rounds < self.rounds as usize {
                    let _ = write!(row, "  ({} of {} rounds)", p.rounds, self.rounds);
                }
                let _ = writeln!(out, "{row}");
            }
            if log {
                let _ = writeln!(out, "(the log's counts include the warm-up)");
            }
            let _ = writeln!(out);
        }
        let _ = writeln!(
            out,
            "{} s per point after {} s warm-up, {} round{}, preset {}{}, seed {}, {} core{}; {:.0} s in all",
            self.duration_s,
            self.warmup_s,
            self.rounds,
            plural(self.rounds as usize),
            self.preset,
            if self.switches.is_empty() {
                String::new()
            } else {
                format!(" (off: {})", self.switches.join(","))
            },
            self.seed,
            self.cores,
            plural(self.cores),
            self.wall_s
        );
        if let Some(line) = self.cpu_idle.note(true) {
            let _ = writeln!(out, "{line}");
        }
        if self.interrupted {
            let _ = writeln!(
                out,
                "interrupted (Ctrl-C or SIGTERM): {} of {} points run; a point it cut short is \
                 left out",
                self.points_run, self.points_planned
            );
        }
        out
    }
}

/// A configuration described from its first point, for a table's heading.
fn describe_point(configuration: Configuration, workload: &str, first: &Point) -> String {
    let unit = if workload == "tpcc" {
        "warehouse"
    } else {
        "branch"
    };
    let scale = match configuration {
        Configuration::Shared => format!("{} shared", describe_scale(workload, first.scale)),
        Configuration::Processes => format!(
            "one process of one thread per {unit}, each on a database of its own, started \
             together (nothing shared but the machine)"
        ),
        Configuration::Partitioned | Configuration::Durable if partitions(workload) => {
            format!("one {unit} per thread")
        }
        _ => describe_scale(workload, first.scale),
    };
    let place = if configuration.durable() {
        "on disk, log forced at every commit"
    } else {
        "in memory"
    };
    format!("{scale}, {place}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_lists_are_sorted_and_refuse_zero_and_junk() {
        assert_eq!(parse_threads("1,2,4,16").unwrap(), vec![1, 2, 4, 16]);
        assert_eq!(parse_threads("4, 1 ,2,2").unwrap(), vec![1, 2, 4]);
        let zero = parse_threads("1,0").unwrap_err().0;
        assert!(
            zero.contains("--threads 1,0") && zero.contains("at least 1"),
            "{zero}"
        );
        let junk = parse_threads("1,x").unwrap_err().0;
        assert!(junk.contains("'x'"), "{junk}");
        assert!(parse_threads("").is_err());
        assert!(parse_threads("1,,2").is_err());
        assert!(parse_threads("-1").is_err());
        let many = parse_threads("5000").unwrap_err().0;
        assert!(many.contains("4096"), "{many}");
    }

    #[test]
    fn default_threads_double_up_to_the_cores() {
        assert_eq!(default_threads(1), vec![1]);
        assert_eq!(default_threads(2), vec![1, 2]);
        assert_eq!(default_threads(8), vec![1, 2, 4, 8]);
        assert_eq!(default_threads(6), vec![1, 2, 4, 6]);
        assert_eq!(default_threads(0), vec![1]);
    }

    #[test]
    fn configurations_apply_by_workload() {
        use Configuration::*;
        assert_eq!(
            Configuration::all_for("tpcc"),
            vec![Partitioned, Shared, Durable, Processes]
        );
        // Processes start a process per thread: measured only when named.
        assert_eq!(
            Configuration::default_for("tpcb"),
            vec![Partitioned, Shared, Durable]
        );
        assert_eq!(Configuration::all_for("ycsb"), vec![Embedded, Durable]);
        assert_eq!(
            parse_configurations("tpcc", "processes,partitioned").unwrap(),
            vec![Partitioned, Processes]
        );
        assert!(parse_configurations("ycsb", "processes").is_err());
        assert_eq!(
            parse_configurations("tpcb", "durable,shared,durable").unwrap(),
            vec![Shared, Durable]
        );
        let unknown = parse_configurations("tpcb", "fast").unwrap_err().0;
        assert!(
            unknown.contains("'fast'") && unknown.contains("partitioned, shared, durable"),
            "{unknown}"
        );
        let wrong = parse_configurations("voter", "shared").unwrap_err().0;
        assert!(
            wrong.contains("does not apply to voter") && wrong.contains("embedded, durable"),
            "{wrong}"
        );
        assert!(parse_configurations("tpcc", "embedded").is_err());
    }

    #[test]
    fn scales_follow_the_configuration() {
        use Configuration::*;
        let scales = Scales {
            given: 100_000,
            shared: 3,
        };
        assert_eq!(Partitioned.scale("tpcc", 8, scales), 8);
        assert_eq!(Durable.scale("tpcb", 4, scales), 4);
        assert_eq!(Shared.scale("tpcb", 4, scales), 3);
        // Each process has a database of one warehouse of its own.
        assert_eq!(Processes.scale("tpcc", 16, scales), 1);
        assert_eq!(Embedded.scale("ycsb", 4, scales), 100_000);
        assert_eq!(Durable.scale("ycsb", 4, scales), 100_000);
        assert!(Scales::resolve("tpcc", &[Partitioned], Some(2), None).is_err());
        assert!(Scales::resolve("tpcc", &[Partitioned], None, Some(2)).is_err());
        assert_eq!(
            Scales::resolve("tpcc", &[Shared], None, Some(2)).unwrap(),
            Scales {
                given: 1,
                shared: 2
            }
        );
        assert_eq!(
            Scales::resolve("ycsb", &[Embedded], Some(500), None)
                .unwrap()
                .given,
            500
        );
    }

    #[test]
    fn speedup_and_efficiency_are_over_the_first_count() {
        assert_eq!(speedup(1000.0, 1, 1000.0, 1), (1.0, 1.0));
        assert_eq!(speedup(1500.0, 2, 1000.0, 1), (1.5, 0.75));
        // Over 2 threads: 4 threads at twice the throughput is linear.
        assert_eq!(speedup(2000.0, 4, 1000.0, 2), (2.0, 1.0));
        assert_eq!(speedup(5.0, 2, 0.0, 1), (0.0, 0.0));
    }

    fn sweep(rounds: u32) -> ScaleConfig {
        ScaleConfig {
            base: BenchConfig::new("tpcb"),
            threads: vec![1, 2],
            configurations: vec![Configuration::Partitioned, Configuration::Durable],
            scales: Scales {
                given: 1,
                shared: 1,
            },
            rounds,
            dir: None,
            out: PathBuf::from("unused"),
            json: None,
            command_line: "glass scale tpcb".into(),
            cores: 2,
            process_args: Vec::new(),
        }
    }

    fn process(tps: f64, p50_us: u64, p99_us: u64, consistency: &str) -> ProcessFigures {
        ProcessFigures {
            tps,
            txn_count: (tps * 2.0) as u64,
            aborts: 4,
            duration_s: 2.0,
            p50_us,
            p99_us,
            load_s: Some(0.5),
            consistency: consistency.into(),
        }
    }

    #[test]
    fn a_processes_point_sums_its_processes_and_takes_their_median_latencies() {
        let mut config = sweep(2);
        config.configurations = vec![Configuration::Processes];
        let runs = vec![
            (
                (Configuration::Processes, 1),
                Run::Processes(vec![process(1000.0, 20, 50, "ok")]),
            ),
            (
                (Configuration::Processes, 2),
                Run::Processes(vec![
                    process(900.0, 20, 60, "ok"),
                    process(700.0, 30, 90, "ok"),
                ]),
            ),
            (
                (Configuration::Processes, 1),
                Run::Processes(vec![process(800.0, 24, 40, "ok")]),
            ),
            (
                (Configuration::Processes, 2),
                Run::Processes(vec![
                    process(1000.0, 22, 70, "ok"),
                    process(1000.0, 26, 80, "3.3.2.1 fails"),
                ]),
            ),
        ];
        let points = summarize(&config, runs);
        let [one, two] = &points[..] else {
            panic!("two points: {points:?}")
        };
        // Rounds of one process: 1000 and 800; of two: 1600 and 2000.
        assert_eq!((one.tps, one.tps_low, one.tps_high), (900.0, 800.0, 1000.0));
        assert_eq!(
            (two.tps, two.tps_low, two.tps_high),
            (1800.0, 1600.0, 2000.0)
        );
        assert_eq!(two.speedup, 2.0);
        assert_eq!(two.linear_tps, 1800.0);
        // Per round the processes' median (25 and 24), then the rounds' median.
        assert_eq!(two.p50_us, 25);
        assert_eq!(two.p99_us, 75);
        // Each process's aborts a second, summed: 2 + 2.
        assert_eq!(two.aborts_per_s, 4.0);
        assert_eq!(two.consistency, "3.3.2.1 fails");
        assert_eq!((one.scale, one.durable), (1, false));
        assert!(two.runs.is_empty());
        assert_eq!(two.processes.len(), 2);
        assert_eq!(two.processes[1].len(), 2);
    }

    #[test]
    fn processes_are_refused_without_the_arguments_that_start_them() {
        let mut config = sweep(1);
        config.configurations = vec![Configuration::Processes];
        let err = config.validate(Path::new("/unused")).unwrap_err();
        assert!(err.to_string().contains("--configs processes"), "{err}");
        // Each process's run is one thread on one warehouse (branch).
        let step = Step {
            round: 0,
            configuration: Configuration::Processes,
            threads: 8,
        };
        let run = config.bench_config(step, Path::new("/unused"));
        assert_eq!((run.threads, run.options.scale), (1, 1));
    }

    #[test]
    fn rounds_interleave_every_point() {
        let order: Vec<(u32, &str, usize)> = sweep(2)
            .steps()
            .iter()
            .map(|s| (s.round, s.configuration.name(), s.threads))
            .collect();
        assert_eq!(
            order,
            vec![
                (0, "partitioned", 1),
                (0, "partitioned", 2),
                (0, "durable", 1),
                (0, "durable", 2),
                (1, "partitioned", 1),
                (1, "partitioned", 2),
                (1, "durable", 1),
                (1, "durable", 2),
            ]
        );
        // Durable points share a database per scale across rounds; in-memory ones have none.
        let config = sweep(2);
        let dir = Path::new("/d");
        let path = |round, configuration, threads| {
            config
                .bench_config(
                    Step {
                        round,
                        configuration,
                        threads,
                    },
                    dir,
                )
                .db
                .path
        };
        assert_eq!(
            path(1, Configuration::Durable, 2),
            Some(PathBuf::from("/d/tpcb-scale-2"))
        );
        assert_eq!(
            path(0, Configuration::Durable, 2),
            path(1, Configuration::Durable, 2)
        );
        assert_eq!(path(0, Configuration::Partitioned, 2), None);
        let durable = config.bench_config(
            Step {
                round: 1,
                configuration: Configuration::Durable,
                threads: 2,
            },
            dir,
        );
        assert!(durable.db.durable && durable.quiet && durable.json.is_none());
        assert_eq!(durable.seed, 42 + 2, "round 1's streams follow round 0's");
    }

    fn point(config: &str, threads: usize, tps: f64, log: Option<f64>) -> Point {
        Point {
            config: config.into(),
            threads,
            scale: threads as u64,
            durable: log.is_some(),
            tps,
            tps_low: tps * 0.9,
            tps_high: tps * 1.1,
            speedup: 1.0,
            efficiency: 1.0,
            linear_tps: tps,
            p50_us: 10,
            p99_us: 20,
            aborts_per_s: 0.0,
            forces_per_commit: log,
            commits_per_batch: log.map(|l| 1.0 / l),
            gather_us_per_force: log.map(|_| 0.0),
            consistency: "ok".into(),
            rounds: 1,
            runs: Vec::new(),
            processes: Vec::new(),
        }
    }

    fn result(rounds: u32) -> ScaleResult {
        ScaleResult {
            command: "glass scale tpcb".into(),
            cores: 2,
            cpu_idle: crate::cpu_idle::CpuIdle::default(),
            glass_version: "0.1.0".into(),
            timestamp: "2026-01-01T00:00:00Z".into(),
            workload: "tpcb".into(),
            mix: "full".into(),
            ycsb_workload: None,
            preset: "full".into(),
            switches: Vec::new(),
            duration_s: 5.0,
            warmup_s: 1.0,
            rounds,
            seed: 42,
            pool_mib: 256,
            threads: vec![1, 2],
            configs: vec!["partitioned".into(), "durable".into()],
            points: vec![
                point("partitioned", 1, 1000.0, None),
                point("partitioned", 2, 1800.0, None),
                point("durable", 1, 100.0, Some(1.0)),
                point("durable", 2, 150.0, Some(0.5)),
            ]
            .into_iter()
            .map(|p| Point {
                rounds: rounds as usize,
                ..p
            })
            .collect(),
            figures: Vec::new(),
            wall_s: 12.0,
            interrupted: false,
            points_run: 4 * rounds as usize,
            points_planned: 4 * rounds as usize,
        }
    }

    #[test]
    fn tables_show_ranges_only_for_rounds_and_the_log_only_on_disk() {
        let one = result(1).render();
        let (memory, disk) = one.split_at(one.find("TPC-B durable").unwrap());
        assert!(memory.starts_with("TPC-B partitioned: one branch per thread, in memory"));
        assert!(!memory.contains("forces/commit"), "{one}");
        assert!(
            disk.contains("forces/commit") && disk.contains("0.500"),
            "{one}"
        );
        assert!(!one.contains("range"), "{one}");
        let three = result(3).render();
        assert!(
            three.contains("range") && three.contains("900–1100"),
            "{three}"
        );
        assert!(three.contains("medians of 3 rounds"), "{three}");
    }

    #[test]
    fn an_interrupted_sweep_says_so_and_marks_the_points_short_of_rounds() {
        let whole = result(3).render();
        // No row says it has fewer rounds ("  (2 of 3 rounds)"), and no line says "interrupted".
        assert!(
            !whole.contains("interrupted") && !whole.contains("  ("),
            "{whole}"
        );
        let mut cut = result(3);
        cut.interrupted = true;
        cut.points_run = 9;
        cut.points[3].rounds = 2;
        let text = cut.render();
        let short: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("(2 of 3 rounds)"))
            .collect();
        assert_eq!(short.len(), 1, "{text}");
        assert!(short[0].trim_start().starts_with("2 "), "{text}");
        assert!(
            text.lines().last().is_some_and(|l| l
                == "interrupted (Ctrl-C or SIGTERM): 9 of 12 points run; a point it cut short is \
                    left out"),
            "{text}"
        );
    }

    #[test]
    fn a_sweep_on_vcpus_that_halt_at_once_says_so_after_its_tables() {
        assert!(!result(1).render().contains("machine:"));
        let mut halting = result(1);
        halting.cpu_idle = crate::cpu_idle::CpuIdle {
            driver: Some("haltpoll".into()),
            governor: None,
            halt_poll_ns: Some(0),
        };
        let text = halting.render();
        assert!(
            text.lines()
                .last()
                .is_some_and(|l| l.starts_with("machine: idle vCPUs halt at once")),
            "{text}"
        );
    }

    #[test]
    fn the_figure_pairs_each_line_with_its_dashed_linear_line() {
        let figure = result(3).figure();
        let names: Vec<(&str, bool)> = figure
            .lines
            .iter()
            .map(|l| (l.name.as_str(), l.dashed))
            .collect();
        assert_eq!(
            names,
            vec![
                ("partitioned", false),
                ("linear (partitioned)", true),
                ("durable", false),
                ("linear (durable)", true),
            ]
        );
        assert_eq!(figure.lines[0].color, figure.lines[1].color);
        assert_ne!(figure.lines[0].color, figure.lines[2].color);
        assert_eq!(figure.lines[0].ranges.len(), 2);
        assert!(figure.title.contains("TPC-B") && figure.title.contains("2 cores"));
        assert!(result(1).figure().lines[0].ranges.is_empty());
    }

    #[test]
    fn spread_is_median_and_range() {
        let s = Spread::of(&[30.0, 10.0, 20.0]);
        assert_eq!((s.median, s.low, s.high), (20.0, 10.0, 30.0));
        let s = Spread::of(&[4.0, 1.0, 3.0, 2.0]);
        assert_eq!((s.median, s.low, s.high), (2.5, 1.0, 4.0));
        let s = Spread::of(&[7.0]);
        assert_eq!((s.median, s.low, s.high), (7.0, 7.0, 7.0));
        let s = Spread::of(&[]);
        assert_eq!((s.median, s.low, s.high), (0.0, 0.0, 0.0));
    }
}
