//! `glass`: the command line. It parses arguments and calls into the `bench` crate.
//!
//! Exit codes: 0 success; 1 a run failed or a consistency condition does not hold; 2 a usage
//! error (unknown flag, bad value, impossible configuration), reported in one line naming the
//! bad value and the valid choices.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use bench::driver::Stop;
use bench::run::{build_switches, default_scale, run_bench, run_check, run_load, BenchConfig};
use bench::scale::{Configuration, Scales};
use bench::UsageError;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use engine::db::{DbConfig, Doublewrite, FullPageImages, LogSync};
use workloads::{Distribution, Mix, WorkloadOptions};

#[derive(Parser, Debug)]
#[command(
    name = "glass",
    version,
    about = "Glass: an OLTP engine you can see through",
    arg_required_else_help = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Load a workload (in memory unless --db) and run it closed-loop; print throughput,
    /// latency percentiles and the consistency check.
    Bench(BenchArgs),
    /// Create and populate a database on disk.
    Load(LoadArgs),
    /// Open a database (recovering it if needed, creating nothing), verify its integrity
    /// (pages, B+-trees, heaps, indexes against tables, catalog against the page file), then
    /// check the workload's consistency conditions; exit 0 only if no fault is found and all
    /// conditions hold.
    Check(CheckArgs),
    /// Measure the removal ladder: instructions per transaction under callgrind and time per
    /// transaction natively, rung by rung; write a table, JSON and figures.
    Ladder(LadderArgs),
    /// Run a workload on one thread and print, per transaction type, the records, locks,
    /// pages, log bytes, latches and lock waits of a transaction; with --instructions, also
    /// instructions per transaction by component under callgrind.
    Profile(ProfileArgs),
    /// Measure throughput against threads: run the workload at 1, 2, 4, ... threads (up to
    /// the cores, or --threads) in each configuration (partitioned, shared, durable; for YCSB
    /// and Voter embedded, durable); print a table per configuration with speed-up and
    /// efficiency, and draw throughput against threads with the linear line.
    Scale(ScaleArgs),
    /// Serve a workload's database over TCP and/or a Unix socket (loaded in memory, or
    /// --db DIR): stored procedures, interactive transactions, and auto-committed operations.
    /// Prints where it listens; runs until SIGINT or SIGTERM, then stops cleanly and checks
    /// the workload's consistency (exit 1 if a condition does not hold).
    Serve(ServeArgs),
    /// A procedure process, started by `glass serve --isolation process|container` for each
    /// worker; not run by hand.
    #[command(hide = true)]
    Guest(GuestArgs),
    /// Latency against load (the 2025 paper's Figure 4): against a `glass serve`, find each
    /// mode's closed-loop peak, then offer open-loop loads at fractions of it until latency
    /// climbs; print a table and draw median and p99 latency against achieved throughput.
    Latency(LatencyArgs),
    /// The 2025 paper's section 3 on this machine: Figures 3, 4 and 5 and the end-to-end
    /// latency table for YCSB-C, Voter and TPC-C, each beside the paper's numbers; servers
    /// (`glass serve` children) pinned to one core, clients to another. Writes section3.md,
    /// section3.json and the figures.
    Section3(Section3Args),
    /// What isolating stored procedures costs (the 2025 paper's Figures 6 and 7): per
    /// workload and isolation level (rust, process over tcp, uds, shm-uds and shm-poll,
    /// container), a `glass serve --isolation` child pinned to one core, clients on another;
    /// the time per transaction in each phase, isolation overhead among them, and latency
    /// against throughput. Writes isolation.md, isolation.json and the figures.
    Isolation(IsolationArgs),
    /// The Charm paper's experiments (two-stage transaction execution) on TPC-C: calibrate the
    /// CPU per transaction, the emulated device's latency and pools by hit rate, then run the
    /// concurrency and buffer sweeps and Tables 6 to 8 under conventional, TSTE, OTSTE and
    /// HTSTE execution. Writes charm.md (every table beside the paper's), charm.json and the
    /// figures.
    Charm(CharmArgs),
    /// Crash campaign: run workloads on disk, kill them with SIGKILL at random moments, and
    /// check after each kill that the database recovers intact with every acknowledged
    /// commit; print a table, exit 1 if any database or commit was lost.
    Crash(CrashArgs),
    /// One rung's measured run (started by `glass ladder`, natively or under callgrind).
    #[command(hide = true)]
    LadderChild(LadderChildArgs),
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum LadderWorkload {
    Tpcc,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum LadderTxn {
    NewOrder,
    Payment,
    Mix,
}

#[derive(Args, Debug)]
struct LadderArgs {
    #[arg(value_enum)]
    workload: LadderWorkload,
    /// Which transactions to measure: New-Order, Payment, or both and the paper's 50/50 mix.
    #[arg(long, value_enum, default_value = "mix")]
    txn: LadderTxn,
    /// Measured transactions per phase and rung (counted under callgrind).
    #[arg(long, value_name = "N", default_value_t = bench::ladder::DEFAULT_TXNS, value_parser = parse_positive)]
    txns: u64,
    /// Transactions per phase, rung and repetition timed natively [default: 10 × --txns].
    #[arg(long, value_name = "N", value_parser = parse_positive)]
    native_txns: Option<u64>,
    /// Directory for the table, JSON, figures and callgrind files.
    #[arg(long, value_name = "DIR", default_value = "glass-out/ladder")]
    out: PathBuf,
    /// Callgrind runs at the same time.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=64))]
    jobs: u64,
    /// Reduced TPC-C ITEM rows, for quick tests only (the paper's figures need 100000).
    #[arg(long, hide = true, default_value_t = 100_000)]
    items: u32,
    /// Reduced customers per district, for quick tests only (3000 at full size).
    #[arg(long, hide = true, default_value_t = 3_000)]
    customers: u32,
}

#[derive(Args, Debug)]
struct LadderChildArgs {
    #[arg(long)]
    rung: usize,
    /// Comma-separated phases: new-order, payment, mix.
    #[arg(long)]
    phases: String,
    #[arg(long)]
    txns: u64,
    #[arg(long, default_value_t = 200)]
    warmup: u64,
    #[arg(long, default_value_t = 100_000)]
    items: u32,
    #[arg(long, default_value_t = 3_000)]
    customers: u32,
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

#[derive(Args, Debug)]
struct ProfileArgs {
    #[arg(value_enum)]
    workload: WorkloadName,
    /// Also count instructions per transaction by component, under callgrind.
    #[arg(long)]
    instructions: bool,
    /// Measured transactions of each type.
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = parse_positive)]
    txns: u64,
    /// Transactions of the workload's mix run first, unprofiled, so that the profile is the
    /// database's steady state rather than a freshly loaded one's (whose young B+-trees log
    /// more: TPC-B 684 log bytes a transaction over the first 1,000, 522 once grown).
    #[arg(long, value_name = "N", default_value_t = bench::table4::DEFAULT_WARMUP)]
    warmup_txns: u64,
    #[command(flatten)]
    data: DataArgs,
    /// TPC-C mix.
    #[arg(long, value_enum, default_value = "full")]
    mix: MixName,
    /// YCSB core workload, A to F.
    #[arg(long, value_name = "A..F", value_parser = parse_ycsb_workload)]
    ycsb_workload: Option<char>,
    #[command(flatten)]
    engine: EngineArgs,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Keep the callgrind files of --instructions here (default: a temporary directory,
    /// removed at the end).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Set the database up as a run on this many threads would be (its per-thread shards and
    /// partitions), though one thread runs the profiled transactions: the shared-write counts
    /// are then those of each thread of such a run (default: this machine's cores).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1024))]
    threads: Option<u64>,
    /// Internal: run the measured child (under callgrind).
    #[arg(long, hide = true)]
    child: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum WorkloadName {
    Tpcc,
    Tpcb,
    Ycsb,
    Voter,
    /// The containment tests' hostile procedures (terminals draw only the harmless `bump`).
    Hostile,
}

impl WorkloadName {
    fn name(self) -> &'static str {
        match self {
            WorkloadName::Tpcc => "tpcc",
            WorkloadName::Tpcb => "tpcb",
            WorkloadName::Ycsb => "ycsb",
            WorkloadName::Voter => "voter",
            WorkloadName::Hostile => workloads::hostile::NAME,
        }
    }
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum PresetName {
    Full,
    Stripped,
    Optimal,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum MixName {
    Full,
    Paper,
    /// TPC-C: the Charm paper's 43/43/4.7/4.7/4.6
    Charm,
}

fn mix_of(name: MixName) -> Mix {
    match name {
        MixName::Full => Mix::Full,
        MixName::Paper => Mix::Paper,
        MixName::Charm => Mix::Charm,
    }
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum ExecutionName {
    /// one stage: two-phase locking, pages read as they are needed
    Conventional,
    /// a fetch stage (no locks, no writes, pages pinned), then the operate stage
    Tste,
    /// operate first, pinning; on the first read roll back and run both stages
    Otste,
    /// per transaction type, from online statistics
    Htste,
    /// per transaction type, the paper's fixed assignment
    HtstePaper,
}

/// How `glass bench` executes each transaction (in process, with a buffer pool).
#[derive(Args, Debug)]
struct ExecutionArgs {
    /// Execution strategy (two-stage execution needs page-access on, the default); with any
    /// of them the run reports I/O, lock wait, mis-prefetches, conversions and pinned memory
    /// per transaction type.
    #[arg(long, value_enum)]
    execution: Option<ExecutionName>,
    /// CPU time spun after each run of a transaction's body, in each stage (the Charm
    /// paper's "idle loop"), in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 0.0, value_parser = parse_millis, requires = "execution")]
    spin_ms: f64,
    /// HTSTE: the mis-prefetch ratio (percent of operate-stage page accesses after a fetch
    /// stage that read from the device) above which a type runs conventionally.
    #[arg(long, value_name = "PERCENT", default_value_t = 10.0, value_parser = parse_percent, requires = "execution")]
    mis_prefetch_threshold: f64,
}

impl ExecutionArgs {
    fn config(&self) -> Option<engine::execution::ExecutionConfig> {
        use engine::execution::Strategy;
        let strategy = match self.execution? {
            ExecutionName::Conventional => Strategy::Conventional,
            ExecutionName::Tste => Strategy::Tste,
            ExecutionName::Otste => Strategy::Otste,
            ExecutionName::Htste => Strategy::Htste,
            ExecutionName::HtstePaper => Strategy::HtstePaper,
        };
        Some(engine::execution::ExecutionConfig {
            strategy,
            spin: Duration::from_secs_f64(self.spin_ms / 1e3),
            htste: engine::execution::HtsteConfig {
                mis_prefetch: self.mis_prefetch_threshold / 100.0,
                ..Default::default()
            },
        })
    }
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum QueueName {
    /// every request waits its own delay, in parallel with the others
    Fixed,
    /// requests are served one at a time, in arrival order (one disk arm)
    Single,
}

/// An emulated device under the page file and the log (for disk-bound experiments that
/// repeat on any machine).
#[derive(Args, Debug)]
struct DeviceArgs {
    /// Microseconds added to each page read from the page file.
    #[arg(long, value_name = "US", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=10_000_000))]
    device_read_us: u64,
    /// Microseconds added to each page written to the page file.
    #[arg(long, value_name = "US", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=10_000_000))]
    device_write_us: u64,
    /// How the page file's device serves concurrent requests.
    #[arg(long, value_enum, default_value = "single")]
    device_queue: QueueName,
    /// Microseconds added to each write and sync of the log, on a device of its own.
    #[arg(long, value_name = "US", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=10_000_000))]
    log_device_us: u64,
    /// Tables (comma-separated) whose pages go to a second data device with the same latency
    /// and a queue of its own (the Charm paper's order-line disk). Decided as pages are
    /// allocated: give it to the run that loads the database.
    #[arg(long, value_name = "TABLES", value_delimiter = ',')]
    device_tables: Vec<String>,
}

impl DeviceArgs {
    fn apply(&self, db: DbConfig) -> DbConfig {
        DbConfig {
            device: storage::DeviceModel {
                read_delay: Duration::from_micros(self.device_read_us),
                write_delay: Duration::from_micros(self.device_write_us),
                mode: match self.device_queue {
                    QueueName::Fixed => storage::QueueMode::Fixed,
                    QueueName::Single => storage::QueueMode::SingleQueue,
                },
            },
            log_device: Duration::from_micros(self.log_device_us),
            second_device_tables: self.device_tables.clone(),
            ..db
        }
    }
}

/// A number within `range`, or a message naming `what` it should have been.
fn parse_within(s: &str, range: std::ops::RangeInclusive<f64>, what: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("'{s}' is not {what}"))?;
    if !range.contains(&v) {
        return Err(format!(
            "{v} is outside {}..={} ({what})",
            range.start(),
            range.end()
        ));
    }
    Ok(v)
}

fn parse_millis(s: &str) -> Result<f64, String> {
    parse_within(s, 0.0..=60_000.0, "a number of milliseconds")
}

fn parse_percent(s: &str) -> Result<f64, String> {
    parse_within(s, 0.0..=100.0, "a percentage")
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum DistributionName {
    Uniform,
    Zipfian,
    Latest,
}

/// Options that decide what is loaded.
#[derive(Args, Debug)]
struct DataArgs {
    /// Warehouses (tpcc), branches (tpcb), records (ycsb; default 100000), 10,000s of voters
    /// (voter).
    #[arg(long, value_parser = parse_positive)]
    scale: Option<u64>,
    /// YCSB bytes per field.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=4096))]
    field_size: u64,
    /// YCSB fields per record.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=64))]
    field_count: u64,
}

/// How the log file's writes become durable.
#[derive(ValueEnum, Clone, Copy, Debug)]
enum LogSyncName {
    /// write, then fdatasync: the data, and the file's size only where it changed
    Fdatasync,
    /// write, then fsync: the data and every metadata change
    Fsync,
    /// the log opened O_DSYNC: each write is durable when it returns, no separate sync
    Dsync,
    /// the log opened O_DIRECT | O_DSYNC: whole aligned blocks past the page cache, each
    /// durable when it returns (refused where the file system has no O_DIRECT)
    Direct,
}

/// When whole page images are logged (databases on disk).
#[derive(ValueEnum, Clone, Copy, Debug)]
enum FullPageImagesName {
    /// unless pages go through the doublewrite file (by default they do)
    WithoutDoublewrite,
    /// with --durable, unless pages go through the doublewrite file
    WhenDurable,
    /// always
    On,
    /// never: a tear that left a page's header old fails the open
    Off,
}

/// When pages go through the doublewrite file.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum DoublewriteName {
    /// always
    On,
    /// with --durable only
    WhenDurable,
    /// never: full-page images are logged instead (unless --full-page-images off or
    /// when-durable)
    Off,
}

/// A switch that is on or off (`--flag on|off`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum OnOff {
    On,
    Off,
}

/// Options of the log file (databases on disk).
#[derive(Args, Debug)]
struct LogFileArgs {
    /// How the log file's writes become durable (with --db).
    #[arg(long, value_enum, default_value = "fdatasync")]
    log_sync: LogSyncName,
    /// MiB of zeros kept written ahead of the log file's end, so that a force writes no new
    /// file size; 0: the file grows with each write (with --db).
    #[arg(long, value_name = "MIB", default_value_t = DbConfig::default().log_prealloc_bytes >> 20, value_parser = clap::value_parser!(u64).range(0..=(1 << 20)))]
    log_prealloc_mib: u64,
    /// MiB of log one file holds at most: the log goes on in `wal.log.<offset>` files beside
    /// `wal.log`, and a checkpoint unlinks the whole ones behind it (with --db).
    #[arg(long, value_name = "MIB", default_value_t = DbConfig::default().log_segment_bytes >> 20, value_parser = clap::value_parser!(u64).range(1..=(1 << 20)))]
    log_segment_mib: u64,
    /// Group commit that gathers (with --durable, on disk or in memory; `--commit-gather`
    /// alone: on): a leader first waits (at most one force's time) until the committers it
    /// expects have appended their commits, instead of forcing at once with whatever is
    /// buffered. On by default: durable TPC-B at 8 threads +8–16% on 2 cores, durable TPC-C
    /// unchanged (its committers hold no lock through the wait, with early lock release);
    /// off, a leader forces at once (docs/performance.md, "Gathering by default").
    #[arg(
        long,
        value_enum,
        value_name = "WHEN",
        default_value = "on",
        num_args = 0..=1,
        default_missing_value = "on"
    )]
    commit_gather: OnOff,
    /// Turn early lock release off (with --durable, on disk or in memory). On, a committing
    /// transaction releases its locks once its commit record is buffered, before the force,
    /// so that the transactions waiting for them run during it; a transaction that wrote
    /// nothing waits until every such commit is durable before it returns.
    #[arg(long)]
    no_early_lock_release: bool,
}

impl LogFileArgs {
    /// `db` with these options.
    fn apply(&self, db: DbConfig) -> DbConfig {
        DbConfig {
            log_sync: match self.log_sync {
                LogSyncName::Fdatasync => LogSync::Fdatasync,
                LogSyncName::Fsync => LogSync::Fsync,
                LogSyncName::Dsync => LogSync::Dsync,
                LogSyncName::Direct => LogSync::Direct,
            },
            log_prealloc_bytes: self.log_prealloc_mib << 20,
            log_segment_bytes: self.log_segment_mib << 20,
            gather_commits: self.commit_gather == OnOff::On,
            early_lock_release: !self.no_early_lock_release,
            ..db
        }
    }
}

/// Options that decide how the engine runs, wherever its database lives.
#[derive(Args, Debug)]
struct EngineSetupArgs {
    /// Starting configuration of the removal ladder (optimal: the hand-coded kernel, for
    /// `bench tpcc --mix paper --threads 1` only).
    #[arg(long, value_enum, default_value = "full")]
    preset: PresetName,
    /// Turn one component off (or on) after the preset, e.g. --switch locking=off.
    #[arg(long = "switch", value_name = "NAME=off", value_parser = parse_switch)]
    switches: Vec<String>,
    /// Buffer pool size in MiB (default: enough to hold the whole database, at least 256: a
    /// smaller pool makes a run that was meant to be in memory read and evict pages).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pool_mib: Option<u64>,
    /// Lock heap pages instead of records (Berkeley DB style).
    #[arg(long)]
    page_locking: bool,
    /// Every thread inserts into one insertion page per table instead of a page of its own
    /// (heap pages: on disk, or in memory behind the pool): with --page-locking inserters
    /// queue on it, as Berkeley DB's did on its B+-trees' right-hand leaves. For the Charm
    /// experiments.
    #[arg(long)]
    shared_insert_pages: bool,
    /// Keep every read's locks to commit even where a transaction asks for read committed
    /// (TPC-C's Stock-Level): degree 3 only, as Berkeley DB 2.4 had and as `glass charm`
    /// runs. By default a read-committed read lets its shared record or page locks go as it
    /// ends.
    #[arg(long)]
    no_read_committed: bool,
    /// Ignore the procedures' prefetch hints, to measure what they buy (embedded they are
    /// acted on only with page-access off; with --server --mode interactive the client then
    /// reads no row ahead, every read a round trip of its own).
    #[arg(long)]
    no_prefetch: bool,
    /// Reserve log-buffer bytes record by record, one compare-and-swap on the log's tail
    /// each, instead of a run at a time per thread, to measure what runs buy (logs that are
    /// not forced use runs; see docs/ARCHITECTURE.md, "Runs").
    #[arg(long)]
    no_log_runs: bool,
    /// Ask the kernel to back the buffer pool's page images with transparent huge pages (a
    /// fault per 2 MiB instead of per 4 KiB; measured no faster for TPC-C, and slower to
    /// load: see docs/performance.md).
    #[arg(long)]
    huge_pages: bool,
    /// The log-buffer bytes a thread reserves at once for its page-redo records (a run):
    /// more is fewer compare-and-swaps on the log's tail, and more padding where the buffer
    /// is taken while runs are open.
    #[arg(long, value_name = "BYTES", default_value_t = wal::RUN_BYTES as u64, value_parser = clap::value_parser!(u64).range(wal::MIN_RUN_BYTES as u64..=(1 << 20)))]
    log_run_bytes: u64,
    /// Take a fuzzy checkpoint each time the log has grown by this many KiB (on disk, or in
    /// memory with --durable, whose log they let shrink); full-page images are not counted,
    /// up to four times this much log in all.
    #[arg(long, value_name = "KIB", default_value_t = 65_536, value_parser = clap::value_parser!(u64).range(16..=(1 << 30)))]
    checkpoint_kib: u64,
    /// Take those checkpoints on a thread of their own instead of in the commit that crosses
    /// the threshold: no commit waits for a checkpoint's page writes, at the price of a
    /// thread that competes with the workers for cores (see docs/performance.md,
    /// "Checkpoints off the commit path").
    #[arg(long)]
    background_checkpoints: bool,
    /// Page cleaners to run (on disk): threads that write back the dirty pages the pool's
    /// clock is about to take, so that a transaction's miss finds its victim clean instead
    /// of writing it first; several keep several writes on the device at once. 0: none (see
    /// docs/performance.md, "Page cleaners").
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..=64))]
    page_cleaners: u16,
    /// When a page's first change since it was last written back is logged as the page's
    /// whole image (on disk), so that recovery rebuilds a page write that a power loss tore
    /// with its header old; a kill's tears (the header new) are rebuilt either way. By
    /// default only with `--doublewrite off`, which it then protects (docs/performance.md,
    /// "Torn pages").
    #[arg(long, value_enum, value_name = "WHEN")]
    full_page_images: Option<FullPageImagesName>,
    /// When pages are written back through a doublewrite file (on disk; `--doublewrite`
    /// alone: on): each batch of 256 page writes goes to a slot of `doublewrite.db` (a ring,
    /// see --doublewrite-ring-mib) and is synced before the pages go to their places, which
    /// are synced every half round of the ring, so that a write a crash tears, in whatever
    /// pieces, is put back from its copy at the next open. On by default, in full-page
    /// images' stead and off the commit path (docs/performance.md, "The doublewrite file by
    /// default" and "A database not durable survives a power cut").
    #[arg(
        long,
        value_enum,
        value_name = "WHEN",
        num_args = 0..=1,
        default_missing_value = "on"
    )]
    doublewrite: Option<DoublewriteName>,
    /// MiB of pages the doublewrite file's ring holds, in whole slots of 256 pages (2 MiB at
    /// 8 KiB pages), 2 to 128. By default a quarter of the page file at the open, 16 to 64
    /// MiB: the longer the ring, the fewer syncs of the page file (docs/performance.md, "A
    /// ring sized by the page file").
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(2..=128))]
    doublewrite_ring_mib: Option<u64>,
}

/// Options that decide how the engine runs and where its database lives.
#[derive(Args, Debug)]
struct EngineArgs {
    #[command(flatten)]
    setup: EngineSetupArgs,
    /// Keep the database in this directory (default: in memory).
    #[arg(long, value_name = "DIR")]
    db: Option<PathBuf>,
    /// Force the log at every commit.
    #[arg(long)]
    durable: bool,
    /// Open a database whose log is damaged in its middle by cutting the log at the damage,
    /// losing every transaction logged after it (without this, such a database is refused,
    /// with the damage's LSN).
    #[arg(long, requires = "db")]
    accept_log_loss: bool,
    #[command(flatten)]
    log_file: LogFileArgs,
    #[command(flatten)]
    device: DeviceArgs,
}

impl EngineArgs {
    /// Refuses, without `--db`, the options that only a page file or a log file can act on,
    /// rather than run as if they had been given: a run in memory starts no page cleaner and
    /// has no log file to sync or preallocate. Refuses a doublewrite ring for no doublewrite
    /// file too.
    fn refuse_file_options_in_memory(&self) -> anyhow::Result<()> {
        self.setup.refuse_a_ring_without_the_file()?;
        if self.db.is_some() {
            return Ok(());
        }
        let given = [
            (self.setup.page_cleaners > 0, "--page-cleaners"),
            (self.setup.doublewrite.is_some(), "--doublewrite"),
            (
                self.setup.doublewrite_ring_mib.is_some(),
                "--doublewrite-ring-mib",
            ),
            (self.setup.full_page_images.is_some(), "--full-page-images"),
            (
                !matches!(self.log_file.log_sync, LogSyncName::Fdatasync),
                "--log-sync",
            ),
            (
                self.log_file.log_prealloc_mib != DbConfig::default().log_prealloc_bytes >> 20,
                "--log-prealloc-mib",
            ),
            (
                self.log_file.log_segment_mib != DbConfig::default().log_segment_bytes >> 20,
                "--log-segment-mib",
            ),
        ];
        if let Some((_, flag)) = given.iter().find(|(given, _)| *given) {
            anyhow::bail!(UsageError(format!(
                "{flag} acts on a database on disk: give --db DIR (without it the database is in memory)"
            )));
        }
        Ok(())
    }
}

impl EngineSetupArgs {
    /// Refuses a ring's length for a doublewrite file that is off, rather than ignore it.
    fn refuse_a_ring_without_the_file(&self) -> Result<(), UsageError> {
        match (self.doublewrite, self.doublewrite_ring_mib) {
            (Some(DoublewriteName::Off), Some(_)) => Err(UsageError(
                "--doublewrite-ring-mib sizes the doublewrite file's ring, which --doublewrite \
                 off turns off: give one or the other"
                    .into(),
            )),
            _ => Ok(()),
        }
    }
}

/// The engine options `glass bench --server` acts on itself: `--durable` (the server forces
/// its commits, so an ack log's receipts are durable ones) and `--no-prefetch` (an
/// interactive client reads no row ahead).
const ENGINE_OPTIONS_OF_A_CLIENT: [&str; 2] = ["durable", "no_prefetch"];

/// Refuses, with `--server`, the engine options given on the command line that configure an
/// engine in this process (the database, its pool, its log, the preset...): the server's
/// engine runs as `glass serve` was told, and a report labelled with the client's options
/// would describe a run that did not happen.
fn refuse_engine_options_with_server(bench: &clap::ArgMatches) -> Result<(), UsageError> {
    use clap::parser::ValueSource;
    if bench.value_source("server") != Some(ValueSource::CommandLine) {
        return Ok(());
    }
    let engine = <EngineArgs as Args>::augment_args(clap::Command::new("engine"));
    let given = engine.get_arguments().find(|arg| {
        let id = arg.get_id().as_str();
        !ENGINE_OPTIONS_OF_A_CLIENT.contains(&id)
            && bench.value_source(id) == Some(ValueSource::CommandLine)
    });
    match given {
        Some(arg) => Err(UsageError(format!(
            "--{} configures the engine, which with --server is the server's: give it to glass serve",
            arg.get_long().unwrap_or(arg.get_id().as_str())
        ))),
        None => Ok(()),
    }
}

#[derive(Args, Debug)]
struct BenchArgs {
    #[arg(value_enum)]
    workload: WorkloadName,
    #[command(flatten)]
    data: DataArgs,
    /// Worker threads (closed-loop terminals).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=4096))]
    threads: u64,
    /// Seconds to measure (default 10).
    #[arg(long, value_name = "SECS", value_parser = parse_seconds, conflicts_with = "txns", allow_negative_numbers = true)]
    duration: Option<f64>,
    /// Measure this many transactions (all threads together) instead of a duration.
    #[arg(long, value_name = "N", value_parser = parse_positive)]
    txns: Option<u64>,
    /// Seconds to run before measuring.
    #[arg(long, value_name = "SECS", default_value = "1", value_parser = parse_warmup, allow_negative_numbers = true)]
    warmup: f64,
    #[command(flatten)]
    mix: MixArgs,
    #[command(flatten)]
    engine: EngineArgs,
    /// Seed of the terminals' random streams (terminal i uses SEED + i; in round r,
    /// SEED + r * THREADS + i).
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Measure N rounds after one load, each with its own warm-up and the whole --duration
    /// or --txns, and print each round's throughput and their median (the table covers all
    /// rounds together).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    rounds: u32,
    /// Also write the result as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Append every acknowledged commit (the rows it wrote) to this file as it is
    /// acknowledged, for `glass check --ack-log` to verify after a crash.
    #[arg(long, value_name = "FILE")]
    ack_log: Option<PathBuf>,
    /// Count page-latch handoffs: latched fixes of a page whose last latched fix was another
    /// thread's, by the page's kind, per measured transaction (where threads pass pages' latch
    /// lines between their cores; each latched fix pays a little more to count them).
    #[arg(long)]
    handoffs: bool,
    /// Print only the result table (no status lines or progress).
    #[arg(long)]
    quiet: bool,
    /// Run against the `glass serve` at this address (HOST:PORT or unix://PATH) instead of
    /// in process: one connection per --threads (or --connections).
    #[arg(long, value_name = "ADDR", value_parser = parse_endpoint)]
    server: Option<protocol::Endpoint>,
    /// With --server: sp (each transaction a stored-procedure call), interactive (the
    /// procedure runs here, each operation a round trip, one transaction), or autocommit
    /// (each operation a transaction of its own: the 2025 paper's simulation).
    #[arg(long, value_enum, default_value = "sp", requires = "server")]
    mode: ModeName,
    /// With --server: connections (clients, all multiplexed on one thread); overrides --threads.
    #[arg(long, value_name = "N", requires = "server", value_parser = clap::value_parser!(u64).range(1..=4096))]
    connections: Option<u64>,
    /// Open loop: start this many transactions a second (all threads together, evenly
    /// spaced), latency counted from each one's scheduled start; default: closed loop.
    #[arg(long, value_name = "TPS", value_parser = parse_rate)]
    rate: Option<f64>,
    #[command(flatten)]
    execution: ExecutionArgs,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum ModeName {
    Sp,
    Interactive,
    Autocommit,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum ArchName {
    /// a network thread with every socket, workers behind queues (VoltDB)
    Dedicated,
    /// each worker owns its connections and does its own I/O (PostgreSQL)
    Unified,
}

#[derive(Args, Debug)]
struct LatencyArgs {
    #[arg(value_enum)]
    workload: WorkloadName,
    /// The `glass serve` to load (HOST:PORT or unix://PATH).
    #[arg(long, value_name = "ADDR", value_parser = parse_endpoint)]
    server: protocol::Endpoint,
    /// Client modes, comma-separated: sp, interactive, autocommit.
    #[arg(long, value_name = "LIST", default_value = "sp,interactive")]
    modes: String,
    /// Connections (all on one client thread).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=4096))]
    connections: u64,
    /// Fractions of each mode's closed-loop peak to offer, comma-separated.
    #[arg(long, value_name = "LIST")]
    steps: Option<String>,
    /// Seconds measured per point.
    #[arg(long, value_name = "SECS", default_value = "2", value_parser = parse_seconds)]
    duration: f64,
    /// Seconds of warm-up per point.
    #[arg(long, value_name = "SECS", default_value = "0.5", value_parser = parse_warmup)]
    warmup: f64,
    #[command(flatten)]
    data: DataArgs,
    #[command(flatten)]
    mix: MixArgs,
    /// Directory for latency-W.svg and .png.
    #[arg(long, value_name = "DIR", default_value = "target/latency")]
    out: PathBuf,
    /// Also write the curves as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Print only the table.
    #[arg(long)]
    quiet: bool,
}

#[derive(Args, Debug)]
struct IsolationArgs {
    /// Directory for isolation.md, isolation.json, the traces and the figures.
    #[arg(long, value_name = "DIR", default_value = "target/isolation")]
    out: PathBuf,
    /// Seconds measured per run and per point of the latency curves.
    #[arg(long, value_name = "SECS", default_value = "1", value_parser = parse_seconds)]
    duration: f64,
    /// Seconds of warm-up per run.
    #[arg(long, value_name = "SECS", default_value = "0.3", value_parser = parse_warmup)]
    warmup: f64,
    /// Client connections (TPC-C loads one warehouse per two).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=512))]
    connections: u64,
    /// The core the servers (and their procedure processes) run on.
    #[arg(long, default_value_t = 0)]
    server_core: usize,
    /// The core the clients run on.
    #[arg(long, default_value_t = 1)]
    client_core: usize,
    /// YCSB records.
    #[arg(long, default_value_t = 100_000, value_parser = parse_positive)]
    ycsb_records: u64,
    /// Workloads, comma-separated, of ycsb, voter, tpcc.
    #[arg(long, value_name = "LIST", default_value = "ycsb,voter,tpcc")]
    workloads: String,
    /// Levels, comma-separated, each LEVEL or LEVEL:CHANNEL [default: rust, process over
    /// each channel, container:uds].
    #[arg(long, value_name = "LIST")]
    levels: Option<String>,
    /// Fractions of each level's closed-loop peak offered for the latency curves.
    #[arg(long, value_name = "LIST", default_value = "0.25,0.5,0.75,0.9,1.0")]
    steps: String,
    /// The core the procedure processes run on [default: the server's]. On a core of their
    /// own, both sides of `shm-poll` spin before they yield; on the server's, neither does.
    #[arg(long, value_name = "CORE")]
    procedure_core: Option<usize>,
    /// Closed-loop peaks per level, in rounds that each run every level once (interleaved);
    /// the report gives the median and every round's.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: u32,
    /// For the level vm: what runs the guests, kvm or tcg (see `glass serve --vm-accel`).
    #[arg(long, value_name = "ACCEL", default_value = "kvm", value_parser = parse_accel)]
    vm_accel: server::vm::Accel,
    /// For the level vm: the guest kernel's directory (see `glass serve --vm-guest`).
    #[arg(long, value_name = "DIR")]
    vm_guest: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct CharmArgs {
    /// Fewer, shorter runs on 1 warehouse: Table 6 at 2 and 4 threads, Table 7 without added
    /// CPU, no threshold sweep.
    #[arg(long)]
    quick: bool,
    /// Directory for the TPC-C loads, made once and reused by later commands (each run works
    /// on a fresh copy, in DIR/charm-work) [default: a temporary directory, removed at the
    /// end].
    #[arg(long, value_name = "DIR")]
    db: Option<PathBuf>,
    /// Directory for charm.md, charm.json and the figures.
    #[arg(long, value_name = "DIR", default_value = "charm-results")]
    out: PathBuf,
    /// TPC-C warehouses [default: 5; with --quick 1].
    #[arg(long, value_name = "N", value_parser = parse_positive)]
    warehouses: Option<u64>,
    /// Seconds measured per run [default: 15; with --quick 3].
    #[arg(long, value_name = "SECS", value_parser = parse_seconds)]
    duration: Option<f64>,
    /// Seconds of warm-up per run [default: 5; with --quick 1].
    #[arg(long, value_name = "SECS", value_parser = parse_warmup)]
    warmup: Option<f64>,
    /// Latency of the emulated device, per page read, page write and log write, in
    /// microseconds [default: calibrated, 100 × the CPU per transaction].
    #[arg(long, value_name = "US", value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    read_us: Option<u64>,
    /// Thread counts of the concurrency sweep, comma-separated [default: 1,2,4,6,8,10,12; with
    /// --quick 1,2,4].
    #[arg(long, value_name = "LIST")]
    threads_list: Option<String>,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Experiments left out, comma-separated, of concurrency, buffer, table6, table7, table8,
    /// threshold.
    #[arg(long, value_name = "LIST")]
    skip: Option<String>,
    /// Every thread inserts into one insertion page per table, as Berkeley DB's inserts
    /// shared their B+-trees' right-hand leaves: under page locking, inserters queue on it.
    #[arg(long)]
    shared_insert_pages: bool,
    /// Runs the whole plan N times, round after round (so the runs a ratio compares are
    /// interleaved); each point is the run of median tpmC, and the report gives every
    /// round's and the goal's ratio by round.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: u32,
}

#[derive(Args, Debug)]
struct Section3Args {
    /// Directory for section3.md, section3.json, the traces and the figures.
    #[arg(long, value_name = "DIR", default_value = "target/section3")]
    out: PathBuf,
    /// Seconds measured per run and per point of the latency curves.
    #[arg(long, value_name = "SECS", default_value = "2", value_parser = parse_seconds)]
    duration: f64,
    /// Seconds of warm-up per run.
    #[arg(long, value_name = "SECS", default_value = "0.5", value_parser = parse_warmup)]
    warmup: f64,
    /// Client connections (TPC-C loads one warehouse per two, as the paper's).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=512))]
    connections: u64,
    /// Worker threads of the servers of Figures 4 and 5 (the default: one, for the server's
    /// one core; more workers than cores measure the scheduler's wake-ups). Figure 3's
    /// unified server has a worker per connection.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=512))]
    workers: u64,
    /// The core the servers run on.
    #[arg(long, default_value_t = 0)]
    server_core: usize,
    /// The core the clients run on.
    #[arg(long, default_value_t = 1)]
    client_core: usize,
    /// YCSB records (the paper's 10 million take long to load).
    #[arg(long, default_value_t = 100_000, value_parser = parse_positive)]
    ycsb_records: u64,
    /// Workloads, comma-separated, of ycsb (always needed: Figure 3), voter, tpcc.
    #[arg(long, value_name = "LIST", default_value = "ycsb,voter,tpcc")]
    workloads: String,
}

#[derive(Args, Debug)]
struct ServeArgs {
    #[arg(value_enum)]
    workload: WorkloadName,
    #[command(flatten)]
    data: DataArgs,
    #[command(flatten)]
    mix: MixArgs,
    #[command(flatten)]
    engine: EngineArgs,
    /// Listen on this TCP address (port 0 picks a free port, printed at start).
    #[arg(long, value_name = "HOST:PORT", value_parser = parse_tcp_endpoint)]
    listen: Option<protocol::Endpoint>,
    /// Listen on this Unix-domain socket (a socket file left there is replaced).
    #[arg(long, value_name = "PATH")]
    unix: Option<PathBuf>,
    /// Also serve through a shared-memory region at this path (e.g. /dev/shm/glass), a
    /// spin-polling thread answering in it: the stand-in for kernel bypass (clients connect
    /// with --server shm://PATH). The thread spins while clients are busy, keeping a core.
    #[arg(long, value_name = "PATH")]
    shm: Option<PathBuf>,
    /// Connections the shared-memory region holds (a slot each).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=1024), requires = "shm")]
    shm_slots: u64,
    /// The thread architecture.
    #[arg(long, value_enum, default_value = "dedicated")]
    arch: ArchName,
    /// Worker threads running transactions.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1024))]
    workers: u64,
    /// Connections held at once; more are refused with a Busy error.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_connections: u64,
    /// Seconds an interactive transaction may idle between requests before it is aborted.
    #[arg(long, value_name = "SECS", default_value = "10", value_parser = parse_seconds)]
    idle_timeout: f64,
    /// Milliseconds a transaction waits for a lock before it is told to retry: a backstop.
    /// Deadlocks, also those through a worker that keeps the holder's connection, are found
    /// without it; a wait for an idle client's transaction lasts until that client goes on.
    #[arg(long, value_name = "MS", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    lock_wait_ms: u64,
    /// Time the 2025 paper's eight server-side phases of every request (trace points in the
    /// server's threads) and print, when the server stops, the server CPU per transaction in
    /// each and the split into transaction processing, Glass's networking layer and kernel.
    #[arg(long)]
    trace: bool,
    /// With --trace: also write the breakdown as JSON to this file.
    #[arg(long, value_name = "FILE", requires = "trace")]
    trace_json: Option<PathBuf>,
    /// Where stored procedures run: none (in the worker's thread, loaded from a shared
    /// library and called through raw pointers: unsafe, no isolation at all), rust (in the
    /// worker's thread, compiled into the server: the language's isolation only), wasm (in the worker's thread, compiled to WebAssembly,
    /// in a wasmtime sandbox with bounded memory and time), process (a process of their own
    /// per worker, with an address-space limit and a seccomp allow-list), container (that
    /// process also in user, PID, mount, network and IPC namespaces and a cgroup), vm (that
    /// process in a virtual machine of its own per worker, run by QEMU under KVM or, with
    /// --vm-accel tcg, QEMU's emulation; needs QEMU and a guest kernel: bench/vm/prepare.sh).
    #[arg(long, value_name = "LEVEL", default_value = "rust", value_parser = parse_isolation)]
    isolation: server::Isolation,
    /// With --isolation process or container: what carries calls and operations between a
    /// worker and its procedure process: tcp (loopback), uds (a Unix socket), shm-uds (shared
    /// memory, a Unix socket pair only to wake the other side), shm-poll (shared memory, both
    /// sides polling: a bounded spin, then yielding and napping, since two cores cannot spare
    /// one to spin); with --isolation vm, virtio (a virtio-serial port), tcp (over the
    /// guest's network and QEMU's user-mode network) or shm-poll (memory shared with the VM,
    /// QEMU's ivshmem-plain, both sides polling) [default: uds, virtio for vm].
    #[arg(long, value_name = "CHANNEL", value_parser = parse_channel)]
    channel: Option<server::Channel>,
    /// With --isolation vm: the directory holding the guest's kernel (vmlinuz) and virtio
    /// modules, as bench/vm/prepare.sh writes it [default: $GLASS_VM_GUEST, else
    /// target/vm-guest].
    #[arg(long, value_name = "DIR")]
    vm_guest: Option<PathBuf>,
    /// With --isolation vm: what runs the guests, kvm (the processor) or tcg (QEMU's software
    /// emulation: the same boundary and containment, far slower; for a machine whose KVM
    /// cannot run a guest).
    #[arg(long, value_name = "ACCEL", default_value = "kvm", value_parser = parse_accel)]
    vm_accel: server::vm::Accel,
    /// With --isolation process, container, vm or wasm: the longest a worker waits for its
    /// procedure process's next message (or a WebAssembly procedure runs) before stopping it
    /// and rolling the transaction back.
    #[arg(long, value_name = "MS", default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    procedure_timeout_ms: u64,
    /// With --isolation process, container, vm or wasm: each procedure process's address-space
    /// limit, or each sandbox's memory.
    #[arg(long, value_name = "MIB", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(64..=1_048_576))]
    procedure_memory_mib: u64,
    /// With --isolation process, container or vm: run the procedure processes (or VMs) on this core
    /// [default: wherever the server may run]. `shm-poll`'s two sides spin before they yield
    /// wherever they have two CPUs between them, and not where they share one.
    #[arg(long, value_name = "CORE")]
    procedure_core: Option<usize>,
    /// With --isolation wasm: the procedures compiled to WebAssembly [default:
    /// target/wasm32-wasip1/release/procedures_wasm.wasm beside this binary's target
    /// directory; build it with `rustup target add wasm32-wasip1 && cargo build --release -p
    /// procedures-wasm --target wasm32-wasip1`].
    #[arg(long, value_name = "FILE")]
    wasm_module: Option<PathBuf>,
    /// With --isolation wasm: name the module's compiled functions in /tmp/perf-PID.map, so
    /// that `perf report` and `bench/isolation/callgrind-call.sh` show them by name.
    #[arg(long)]
    wasm_perfmap: bool,
    /// With --isolation none: the procedures as a shared library, loaded into the server
    /// [default: libprocedures_native.so beside this binary; build it with `cargo build
    /// --release -p procedures-native`].
    #[arg(long, value_name = "FILE")]
    native_library: Option<PathBuf>,
    /// Print only where it listens and the final check.
    #[arg(long)]
    quiet: bool,
}

#[derive(Args, Debug)]
struct GuestArgs {
    #[arg(value_enum)]
    workload: WorkloadName,
    #[command(flatten)]
    data: DataArgs,
    #[arg(long, value_parser = parse_channel)]
    channel: server::Channel,
    /// The host's TCP address, Unix socket or shared-memory file.
    #[arg(long)]
    address: String,
    #[arg(long, value_parser = parse_isolation)]
    isolation: server::Isolation,
    #[arg(long, value_name = "MIB")]
    memory_mib: u64,
    /// `shm-poll`: microseconds to spin on the channel before yielding (the host passes 0
    /// where the guest shares its worker's only CPU).
    #[arg(long, value_name = "MICROSECONDS", default_value_t = 0)]
    spin_us: u64,
}

fn parse_isolation(s: &str) -> Result<server::Isolation, String> {
    s.parse()
}

fn parse_channel(s: &str) -> Result<server::Channel, String> {
    s.parse()
}

fn parse_accel(s: &str) -> Result<server::vm::Accel, String> {
    s.parse()
}

/// Options that decide what the terminals run (not what is loaded).
#[derive(Args, Debug)]
struct MixArgs {
    /// TPC-C mix: the specification's five transactions, or the 2008 paper's New-Order and
    /// Payment.
    #[arg(long, value_enum, default_value = "full")]
    mix: MixName,
    /// YCSB core workload, A to F.
    #[arg(long, value_name = "A..F", value_parser = parse_ycsb_workload)]
    ycsb_workload: Option<char>,
    /// YCSB request distribution (default: the core workload's own).
    #[arg(long, value_enum)]
    distribution: Option<DistributionName>,
}

#[derive(Args, Debug)]
struct ScaleArgs {
    #[arg(value_enum)]
    workload: WorkloadName,
    /// Thread counts, separated by commas, e.g. 1,2,4,16 [default: 1, 2, 4, ... up to the
    /// machine's cores, and the core count itself].
    #[arg(long, value_name = "LIST")]
    threads: Option<String>,
    /// Configurations, separated by commas: partitioned (one warehouse or branch per thread),
    /// shared (--shared-scale for all threads), durable (on disk, log forced at commit,
    /// partitioned's scale), processes (one process of one thread per warehouse or branch,
    /// started together: what the machine allows, nothing shared but it); for ycsb and voter:
    /// embedded (in memory), durable [default: all that apply but processes].
    #[arg(long, value_name = "LIST")]
    configs: Option<String>,
    /// Warehouses (tpcc) or branches (tpcb) the shared configuration's threads share
    /// [default: 1].
    #[arg(long, value_name = "N", value_parser = parse_positive)]
    shared_scale: Option<u64>,
    /// Seconds to measure each point.
    #[arg(long, value_name = "SECS", default_value = "5", value_parser = parse_seconds, allow_negative_numbers = true)]
    duration: f64,
    /// Seconds to run each point before measuring it.
    #[arg(long, value_name = "SECS", default_value = "1", value_parser = parse_warmup, allow_negative_numbers = true)]
    warmup: f64,
    /// Measure every point N times, interleaved (each round runs every point once), and
    /// report the median and range.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    rounds: u32,
    #[command(flatten)]
    data: DataArgs,
    #[command(flatten)]
    mix: MixArgs,
    #[command(flatten)]
    engine: EngineSetupArgs,
    #[command(flatten)]
    log_file: LogFileArgs,
    /// Seed of the terminals' random streams (as glass bench's).
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Where the durable configuration's temporary databases go (default: the system's
    /// temporary directory); removed at the end.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Directory of the figures, scale-WORKLOAD.svg and .png.
    #[arg(long, value_name = "DIR", default_value = "target/scale")]
    out: PathBuf,
    /// Also write every point (each run's result, the core count, the command line) as JSON
    /// to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Internal: run one process of a `processes` point, its terminal drawing from this seed.
    #[arg(long, hide = true, requires = "process_out")]
    process_seed: Option<u64>,
    /// Internal: where that process writes its figures.
    #[arg(long, hide = true, requires = "process_seed")]
    process_out: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct CrashArgs {
    /// Workloads to crash, each run durably and not.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "tpcc,tpcb,ycsb,voter"
    )]
    workloads: Vec<WorkloadName>,
    /// How each workload runs, and so what is killed: embedded (`glass bench --db`, killed),
    /// sp or interactive (`glass serve --db`, killed under `glass bench --server` clients
    /// calling stored procedures or sending interactive transactions).
    #[arg(long, value_delimiter = ',', default_value = "embedded", value_parser = parse_via)]
    via: Vec<bench::crash::Via>,
    /// Kills in all, spread evenly over the workloads and modes.
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    kills: u64,
    /// Workloads and modes crashed at the same time.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=64))]
    jobs: u64,
    /// Each kill falls at a random moment up to this many seconds after the bench starts.
    #[arg(long, value_name = "SECS", default_value = "2", value_parser = parse_seconds)]
    max_run: f64,
    /// Start no new round after this many seconds (fewer kills than --kills, then).
    #[arg(long, value_name = "SECS", value_parser = parse_seconds)]
    time_limit: Option<f64>,
    /// Bench threads.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=64))]
    threads: u64,
    /// Fuzzy checkpoint interval of the benches, in KiB of log: small, so that checkpoints
    /// fall everywhere (during read-only transactions, during other checkpoints).
    #[arg(long, value_name = "KIB", default_value_t = 64, value_parser = clap::value_parser!(u64).range(16..=(1 << 30)))]
    checkpoint_kib: u64,
    /// Buffer pool of the benches and checks, in MiB [default: theirs, which holds the data].
    /// Smaller than the data (TPC-C's 131 MiB, YCSB's 14), the benches evict: pages of
    /// transactions still running are written before they commit, and recovery must undo
    /// them.
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pool_mib: Option<u64>,
    /// Fault injection: the benches (and servers) write each page in two halves with a 1 ms
    /// pause between, so that kills tear page writes: the first half first in three rounds in
    /// six (what a killed process leaves), the second first in the others (what a power loss
    /// may leave; rebuilt from full-page images or put back from the doublewrite file). The
    /// checks' recoveries must rebuild every torn page; the table counts them.
    #[arg(long)]
    tear_writes: bool,
    /// Power loss, not only kills: each database lives on a file system in memory (FUSE;
    /// needs root and /dev/fuse) whose power is cut after the load and after every kill.
    /// What was not synced is lost: all of it in odd rounds, in even rounds each unsynced
    /// block, size and directory by a coin toss (a page cache's write-back in any order). A
    /// file a synced directory does not name is gone. Every lane: a durable database must
    /// keep every acknowledged commit, one whose commits are not forced may lose its last
    /// ones; each must pass its check. The databases are not kept between campaigns.
    #[arg(long)]
    power_loss: bool,
    /// Working directory (one database per workload and mode, kept between campaigns; a
    /// failed check's output and a copy of its database are kept there too).
    #[arg(long, value_name = "DIR", default_value = "glass-out/crash")]
    dir: PathBuf,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Also write the result as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct LoadArgs {
    #[arg(value_enum)]
    workload: WorkloadName,
    /// Directory of the database to create.
    #[arg(long, value_name = "DIR", required = true)]
    db: PathBuf,
    #[command(flatten)]
    data: DataArgs,
    /// Buffer pool size in MiB.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pool_mib: u64,
    /// Open a database whose log is damaged in its middle by cutting the log at the damage,
    /// losing every transaction logged after it (without this, such a database is refused,
    /// with the damage's LSN).
    #[arg(long)]
    accept_log_loss: bool,
    #[command(flatten)]
    log_file: LogFileArgs,
}

#[derive(Args, Debug)]
struct CheckArgs {
    #[arg(value_enum)]
    workload: WorkloadName,
    /// Directory of the database to check.
    #[arg(long, value_name = "DIR", required = true)]
    db: PathBuf,
    /// Also look up every acknowledged commit recorded by `glass bench --ack-log FILE`.
    #[arg(long, value_name = "FILE")]
    ack_log: Option<PathBuf>,
    /// Also write what the check found as one JSON object (recovery, integrity, conditions,
    /// acknowledged commits, passed; or the error where no check could be made) to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Buffer pool size in MiB.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pool_mib: u64,
    /// Open a database whose log is damaged in its middle by cutting the log at the damage,
    /// losing every transaction logged after it (without this, such a database is refused,
    /// with the damage's LSN).
    #[arg(long)]
    accept_log_loss: bool,
    #[command(flatten)]
    log_file: LogFileArgs,
}

fn parse_switch(setting: &str) -> Result<String, String> {
    let mut scratch = engine::Switches::default();
    scratch.apply(setting).map_err(|e| e.to_string())?;
    Ok(setting.to_string())
}

fn parse_via(text: &str) -> Result<bench::crash::Via, String> {
    bench::crash::Via::parse(text).ok_or_else(|| {
        let names: Vec<&str> = bench::crash::Via::ALL.iter().map(|v| v.name()).collect();
        format!("{text:?} is not one of {}", names.join(", "))
    })
}

/// A count that must be at least 1 (clap's own range check would name `u64::MAX` as the top).
fn parse_positive(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        Ok(_) => Err("expected a whole number above 0".to_string()),
        Err(e) => Err(format!("expected a whole number above 0 ({e})")),
    }
}

fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s <= 1e7 => Ok(s),
        _ => Err("expected a number of seconds above 0 (e.g. 10 or 2.5)".to_string()),
    }
}

fn parse_warmup(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && (0.0..=1e7).contains(&s) => Ok(s),
        _ => Err("expected a number of seconds, 0 or more".to_string()),
    }
}

fn parse_ycsb_workload(text: &str) -> Result<char, String> {
    let mut chars = text.chars();
    match (chars.next(), chars.next()) {
        (Some(c @ ('A'..='F' | 'a'..='f')), None) => Ok(c.to_ascii_uppercase()),
        _ => Err("expected one of A, B, C, D, E, F".to_string()),
    }
}

fn workload_options(workload: WorkloadName, data: &DataArgs) -> WorkloadOptions {
    WorkloadOptions {
        scale: data.scale.unwrap_or_else(|| default_scale(workload.name())),
        field_size: data.field_size as usize,
        field_count: data.field_count as usize,
        ..WorkloadOptions::default()
    }
}

/// The workload's options: what `data` loads and what `mix` runs.
fn run_options(workload: WorkloadName, data: &DataArgs, mix: &MixArgs) -> WorkloadOptions {
    let mut options = workload_options(workload, data);
    options.mix = mix_of(mix.mix);
    let letter = mix.ycsb_workload.unwrap_or(options.ycsb_workload);
    options.ycsb_workload = letter;
    options.ycsb_distribution = match mix.distribution {
        Some(DistributionName::Uniform) => Distribution::Uniform,
        Some(DistributionName::Zipfian) => Distribution::Zipfian,
        Some(DistributionName::Latest) => Distribution::Latest,
        None => Distribution::standard_for(letter),
    };
    options
}

/// The database configuration `setup` asks for, in memory and not durable (callers set the
/// directory, durability and threads).
fn engine_db(setup: &EngineSetupArgs, switches: engine::Switches) -> DbConfig {
    DbConfig {
        // 0: sized to the database once its scale is known (`bench::run::run_bench`).
        pool_mib: setup.pool_mib.unwrap_or(0) as usize,
        page_locking: setup.page_locking,
        shared_insert_pages: setup.shared_insert_pages,
        read_committed: !setup.no_read_committed,
        prefetch: !setup.no_prefetch,
        log_runs: !setup.no_log_runs,
        huge_pages: setup.huge_pages,
        log_run_bytes: setup.log_run_bytes as usize,
        switches,
        checkpoint_bytes: setup.checkpoint_kib << 10,
        background_checkpoints: setup.background_checkpoints,
        page_cleaners: setup.page_cleaners as usize,
        full_page_images: match setup.full_page_images {
            None => FullPageImages::default(),
            Some(FullPageImagesName::WithoutDoublewrite) => FullPageImages::WithoutDoublewrite,
            Some(FullPageImagesName::WhenDurable) => FullPageImages::WhenDurable,
            Some(FullPageImagesName::On) => FullPageImages::On,
            Some(FullPageImagesName::Off) => FullPageImages::Off,
        },
        doublewrite: match setup.doublewrite {
            None => Doublewrite::default(),
            Some(DoublewriteName::On) => Doublewrite::On,
            Some(DoublewriteName::WhenDurable) => Doublewrite::WhenDurable,
            Some(DoublewriteName::Off) => Doublewrite::Off,
        },
        doublewrite_ring_bytes: setup.doublewrite_ring_mib.map(|mib| mib << 20),
        ..DbConfig::default()
    }
}

fn bench(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let name = args.workload.name();
    let threads = args.threads as usize;
    args.engine.refuse_file_options_in_memory()?;
    let setup = &args.engine.setup;
    let switches = build_switches(preset_name(setup.preset), &setup.switches, threads)?;
    let mut config = BenchConfig::new(name);
    config.options = run_options(args.workload, &args.data, &args.mix);
    config.threads = threads;
    config.stop = match (args.txns, args.duration) {
        (Some(n), _) => Stop::Txns(n),
        (None, Some(secs)) => Stop::Duration(Duration::from_secs_f64(secs)),
        (None, None) => config.stop,
    };
    config.warmup = Duration::from_secs_f64(args.warmup);
    config.db = args
        .engine
        .device
        .apply(args.engine.log_file.apply(DbConfig {
            path: args.engine.db,
            durable: args.engine.durable,
            accept_log_loss: args.engine.accept_log_loss,
            threads,
            ..engine_db(setup, switches)
        }));
    config.execution = args.execution.config();
    if config.execution.is_some() && args.server.is_some() {
        anyhow::bail!(UsageError(
            "--execution runs transactions in this process; with --server the server executes them"
                .into()
        ));
    }
    if args.handoffs && args.server.is_some() {
        anyhow::bail!(UsageError(
            "--handoffs counts the fixes of this process's buffer pool; with --server the \
             server's pool serves them"
                .into()
        ));
    }
    config.handoffs = args.handoffs;
    config.seed = args.seed;
    config.ack_log = args.ack_log;
    config.rounds = args.rounds;
    config.json = args.json;
    config.quiet = args.quiet;
    config.adopt_loaded_scale = args.data.scale.is_none();
    config.rate = args.rate;
    // Ctrl-C or SIGTERM ends the measured phase where it is; the run then finishes as it
    // would have (its check, the database closed, the table over the time measured).
    end_runs_on_interrupt()?;
    if let Some(endpoint) = &args.server {
        if let Some(n) = args.connections {
            config.threads = n as usize;
        }
        let mode = match args.mode {
            ModeName::Sp => bench::remote::Mode::StoredProcedure,
            ModeName::Interactive => bench::remote::Mode::Interactive,
            ModeName::Autocommit => bench::remote::Mode::Autocommit,
        };
        let (result, trips) = bench::remote::run_remote_bench(&config, endpoint, mode)?;
        println!("{}", result.render().trim_end());
        println!("{}", trips.render().trim_end());
        return Ok(exit_status(true, result.interrupted));
    }
    let result = run_bench(&config)?;
    println!("{}", result.render().trim_end());
    Ok(exit_status(result.consistency == "ok", result.interrupted))
}

/// A run's exit status: 1 if it failed (a check, a consistency condition), else 130 if Ctrl-C
/// or SIGTERM ended it early (as a shell reports a command SIGINT ended), else 0.
fn exit_status(ok: bool, interrupted: bool) -> ExitCode {
    match (ok, interrupted) {
        (false, _) => ExitCode::from(1),
        (true, true) => ExitCode::from(130),
        (true, false) => ExitCode::SUCCESS,
    }
}

/// Has the first Ctrl-C or SIGTERM set [`bench::driver::interrupt_flag`], which ends the run
/// then measuring where it is and lets the command finish in order (its check, its database
/// closed, what it measured written); a second ends the process at once, as without the
/// handler.
fn end_runs_on_interrupt() -> anyhow::Result<()> {
    let interrupt = bench::driver::interrupt_flag();
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_default(signal, Arc::clone(&interrupt))
            .and_then(|_| signal_hook::flag::register(signal, Arc::clone(&interrupt)))
            .context("install a signal handler")?;
    }
    Ok(())
}

/// How `glass serve` starts its procedure processes: this binary's hidden `guest` command,
/// with the options the workload's procedures are opened with.
fn guest_config(args: &ServeArgs) -> anyhow::Result<Option<server::GuestConfig>> {
    if args.isolation == server::Isolation::Rust {
        return Ok(None);
    }
    let program =
        std::env::current_exe().context("find this program, to start procedure processes")?;
    let module = args
        .wasm_module
        .clone()
        .unwrap_or_else(|| server::wasm::default_module(&program));
    let library = args
        .native_library
        .clone()
        .unwrap_or_else(|| server::native::default_library(&program));
    let channel = args
        .channel
        .unwrap_or_else(|| args.isolation.default_channel());
    args.isolation
        .check_channel(channel)
        .map_err(|e| anyhow::anyhow!(UsageError(e)))?;
    let vm = if args.isolation == server::Isolation::Vm {
        let dir = args
            .vm_guest
            .clone()
            .unwrap_or_else(server::vm::default_guest_dir);
        let found = server::vm::Vm::find(&dir, args.vm_accel);
        Some(found.map_err(|e| anyhow::anyhow!("glass serve: {e}"))?)
    } else {
        None
    };
    let mut guest_args = vec![
        "guest".to_string(),
        args.workload.name().to_string(),
        "--field-size".to_string(),
        args.data.field_size.to_string(),
        "--field-count".to_string(),
        args.data.field_count.to_string(),
    ];
    if let Some(scale) = args.data.scale {
        guest_args.extend(["--scale".to_string(), scale.to_string()]);
    }
    Ok(Some(server::GuestConfig {
        program,
        args: guest_args,
        channel,
        timeout: Duration::from_millis(args.procedure_timeout_ms),
        memory_mib: args.procedure_memory_mib,
        core: args.procedure_core,
        module: Some(module),
        perfmap: args.wasm_perfmap,
        library: Some(library),
        vm,
    }))
}

/// `glass guest`: a procedure process, until its host goes away.
fn guest(args: GuestArgs) -> anyhow::Result<ExitCode> {
    let options = workload_options(args.workload, &args.data);
    let workload = workloads::by_name(args.workload.name(), &options)
        .map_err(|e| anyhow::anyhow!(UsageError(e)))?;
    let guest_args = server::guest::GuestArgs {
        channel: args.channel,
        address: args.address,
        isolation: args.isolation,
        memory_mib: args.memory_mib,
        spin: std::time::Duration::from_micros(args.spin_us),
    };
    server::guest::run(workload, &guest_args).map_err(|e| anyhow::anyhow!("glass guest: {e}"))?;
    Ok(ExitCode::SUCCESS)
}

fn serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let name = args.workload.name();
    let workers = args.workers as usize;
    args.engine.refuse_file_options_in_memory()?;
    let setup = &args.engine.setup;
    let switches = build_switches(preset_name(setup.preset), &setup.switches, workers)?;
    let guest = guest_config(&args)?;
    let mut bench = BenchConfig::new(name);
    bench.options = run_options(args.workload, &args.data, &args.mix);
    bench.db = args
        .engine
        .device
        .apply(args.engine.log_file.apply(DbConfig {
            path: args.engine.db,
            durable: args.engine.durable,
            accept_log_loss: args.engine.accept_log_loss,
            threads: workers,
            lock_wait_timeout: Duration::from_millis(args.lock_wait_ms),
            ..engine_db(setup, switches)
        }));
    bench.quiet = args.quiet;
    let mut listen = Vec::new();
    listen.extend(args.listen);
    listen.extend(args.unix.map(protocol::Endpoint::Unix));
    listen.extend(args.shm.map(protocol::Endpoint::Shm));
    if listen.is_empty() {
        anyhow::bail!(UsageError(
            "serve needs --listen HOST:PORT, --unix PATH and/or --shm PATH".into()
        ));
    }
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .context("install a signal handler")?;
    }
    let config = bench::remote::ServeConfig {
        bench,
        server: server::ServerConfig {
            arch: match args.arch {
                ArchName::Dedicated => server::Arch::Dedicated,
                ArchName::Unified => server::Arch::Unified,
            },
            workers,
            listen,
            max_connections: args.max_connections as usize,
            idle_timeout: Duration::from_secs_f64(args.idle_timeout),
            shm_slots: args.shm_slots as usize,
            trace: args.trace,
            isolation: args.isolation,
            guest,
            ..server::ServerConfig::default()
        },
        stop,
    };
    let report = bench::remote::run_serve(&config, &mut |endpoint| {
        use std::io::Write;
        match endpoint {
            protocol::Endpoint::Shm(_) => println!(
                "listening on {endpoint} (shared memory, spin-polled: the stand-in for kernel \
                 bypass)"
            ),
            _ => println!("listening on {endpoint}"),
        }
        // A script waiting for the address reads it now, not when the buffer fills.
        let _ = std::io::stdout().flush();
    })?;
    if args.trace {
        let phases = bench::remote::PhaseReport {
            phases: report.stats.phases,
        };
        println!("{}", phases.render().trim_end());
        if let Some(path) = &args.trace_json {
            let text = serde_json::to_string_pretty(&phases.json())?;
            std::fs::write(path, text + "\n")
                .with_context(|| format!("write {}", path.display()))?;
        }
    }
    if let Some(line) = report.pool.and_then(|p| p.render("while serving")) {
        println!("{line}");
    }
    if let Some(line) = report
        .pool
        .and_then(|p| p.render_images(report.log_bytes, "while serving"))
    {
        println!("{line}");
    }
    if let Some(line) = report.pool.and_then(|p| p.render_doublewrite()) {
        println!("{line}");
    }
    let held = report.conditions.iter().filter(|c| c.holds()).count();
    println!(
        "consistency: {held} of {} conditions hold",
        report.conditions.len()
    );
    for c in report.conditions.iter().filter(|c| !c.holds()) {
        println!(
            "  VIOLATED {}: {} ({})",
            c.name,
            c.description,
            c.violation.as_deref().unwrap_or("")
        );
    }
    // The exit code says whether the server stopped cleanly and did its part: conditions
    // broken by autocommit clients are theirs, not a failure of the server.
    Ok(match report.verdict() {
        bench::remote::Verdict::Consistent => ExitCode::SUCCESS,
        bench::remote::Verdict::BrokenByAutocommit { lone_writes } => {
            println!(
                "  (expected: {lone_writes} writing batches were committed alone, as autocommit \
                 clients send every step; a procedure cut into steps that commit apart breaks \
                 conditions by design)"
            );
            ExitCode::SUCCESS
        }
        bench::remote::Verdict::Fault => {
            println!(
                "  (a fault: every transaction ran whole, as a stored procedure or an \
                 interactive transaction)"
            );
            ExitCode::from(1)
        }
    })
}

fn mode_of(name: &str) -> Result<bench::remote::Mode, String> {
    name.trim().parse()
}

fn latency(args: LatencyArgs) -> anyhow::Result<ExitCode> {
    let modes = args
        .modes
        .split(',')
        .map(mode_of)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| UsageError(format!("--modes: {e}")))?;
    let steps = match &args.steps {
        None => bench::latency::DEFAULT_STEPS.to_vec(),
        Some(list) => list
            .split(',')
            .map(|s| {
                s.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|f| f.is_finite() && *f > 0.0)
                    .ok_or_else(|| {
                        UsageError(format!(
                            "--steps: {s:?} is not a positive fraction of the peak"
                        ))
                    })
            })
            .collect::<Result<Vec<_>, _>>()?,
    };
    let mut bench = BenchConfig::new(args.workload.name());
    bench.options = run_options(args.workload, &args.data, &args.mix);
    bench.threads = args.connections as usize;
    bench.stop = Stop::Duration(Duration::from_secs_f64(args.duration));
    bench.warmup = Duration::from_secs_f64(args.warmup);
    bench.seed = args.seed;
    bench.quiet = args.quiet;
    let config = bench::latency::LatencyConfig {
        bench,
        endpoint: args.server,
        modes,
        steps,
        out: args.out,
        json: args.json,
    };
    // Ctrl-C or SIGTERM ends the run measuring (left out) and the sweep, which writes the
    // points measured before it.
    end_runs_on_interrupt()?;
    let result = bench::latency::run_latency(&config)?;
    println!("{}", result.render().trim_end());
    Ok(exit_status(true, result.interrupted))
}

/// How `glass section3` and `glass isolation` run the paper's servers and clients: `workloads`
/// a comma-separated list of ycsb, voter, tpcc; `cores` the server's and the clients'.
fn paper_run(
    out: PathBuf,
    duration: f64,
    warmup: f64,
    connections: u64,
    cores: (usize, usize),
    ycsb_records: u64,
    workloads: &str,
) -> anyhow::Result<bench::section3::Section3Config> {
    let workloads: Vec<String> = workloads.split(',').map(|w| w.trim().to_string()).collect();
    if let Some(bad) = workloads
        .iter()
        .find(|w| !["ycsb", "voter", "tpcc"].contains(&w.as_str()))
    {
        anyhow::bail!(UsageError(format!(
            "--workloads: {bad:?} is not one of ycsb, voter, tpcc"
        )));
    }
    Ok(bench::section3::Section3Config {
        exe: std::env::current_exe().context("find the glass binary")?,
        out,
        duration,
        warmup,
        connections: connections as usize,
        workers: 1,
        server_core: cores.0,
        client_core: cores.1,
        ycsb_records,
        workloads,
    })
}

/// The `glass serve` flags that pass a VM's settings on.
fn vm_args(accel: server::vm::Accel, guest: Option<&Path>) -> Vec<String> {
    let mut args = vec!["--vm-accel".to_string(), accel.to_string()];
    if let Some(dir) = guest {
        args.push("--vm-guest".to_string());
        args.push(dir.display().to_string());
    }
    args
}

fn isolation(args: IsolationArgs) -> anyhow::Result<ExitCode> {
    let run = paper_run(
        args.out,
        args.duration,
        args.warmup,
        args.connections,
        (args.server_core, args.client_core),
        args.ycsb_records,
        &args.workloads,
    )?;
    let levels = match &args.levels {
        Some(list) => bench::isolation::parse_levels(list)
            .map_err(|e| anyhow::anyhow!(UsageError(format!("--levels: {e}"))))?,
        None => bench::isolation::default_levels(),
    };
    let steps = args
        .steps
        .split(',')
        .map(|s| match s.trim().parse::<f64>() {
            Ok(f) if f.is_finite() && f > 0.0 => Ok(f),
            _ => Err(anyhow::anyhow!(UsageError(format!(
                "--steps: {s:?} is not a positive fraction"
            )))),
        })
        .collect::<anyhow::Result<Vec<f64>>>()?;
    let config = bench::isolation::IsolationConfig {
        run,
        levels,
        steps,
        procedure_core: args.procedure_core,
        rounds: args.rounds,
        vm_args: vm_args(args.vm_accel, args.vm_guest.as_deref()),
    };
    end_runs_on_interrupt()?;
    let report = bench::isolation::run_isolation(&config)?;
    println!("{}", report.text.trim_end());
    println!(
        "(written to {})",
        config.run.out.join("isolation.md").display()
    );
    Ok(exit_status(true, report.interrupted.is_some()))
}

fn charm(args: CharmArgs) -> anyhow::Result<ExitCode> {
    let mut config = bench::charm::CharmConfig::new(args.quick);
    config.db = args.db;
    config.out = args.out;
    if let Some(warehouses) = args.warehouses {
        config.warehouses = warehouses;
    }
    if let Some(secs) = args.duration {
        config.duration = Duration::from_secs_f64(secs);
    }
    if let Some(secs) = args.warmup {
        config.warmup = Duration::from_secs_f64(secs);
    }
    config.read_us = args.read_us;
    if let Some(list) = &args.threads_list {
        config.threads = bench::charm::parse_threads(list)?;
    }
    config.seed = args.seed;
    if let Some(list) = &args.skip {
        config.skip = bench::charm::Experiment::parse_list(list)?;
    }
    config.shared_insert_pages = args.shared_insert_pages;
    config.rounds = args.rounds as usize;
    // Ctrl-C or SIGTERM ends the run measuring and the plan; the report covers the runs made
    // before it. Before the first run ends, the command finishes its load and writes nothing.
    end_runs_on_interrupt()?;
    let report = match bench::charm::run_charm(&config) {
        Err(e) if e.is::<bench::charm::InterruptedBeforeARun>() => {
            eprintln!("glass charm: {e}");
            return Ok(ExitCode::from(130));
        }
        other => other?,
    };
    println!("{}", report.markdown.trim_end());
    println!("(written to {})", config.out.join("charm.md").display());
    Ok(exit_status(true, report.interrupted))
}

fn section3(args: Section3Args) -> anyhow::Result<ExitCode> {
    let mut config = paper_run(
        args.out,
        args.duration,
        args.warmup,
        args.connections,
        (args.server_core, args.client_core),
        args.ycsb_records,
        &args.workloads,
    )?;
    config.workers = args.workers as usize;
    end_runs_on_interrupt()?;
    let report = bench::section3::run_section3(&config)?;
    println!("{}", report.text.trim_end());
    println!("(written to {})", config.out.join("section3.md").display());
    Ok(exit_status(true, report.interrupted.is_some()))
}

fn parse_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err(format!(
            "{s:?} is not a positive rate (transactions a second)"
        )),
    }
}

fn parse_endpoint(s: &str) -> Result<protocol::Endpoint, String> {
    s.parse()
}

fn parse_tcp_endpoint(s: &str) -> Result<protocol::Endpoint, String> {
    match s.parse()? {
        protocol::Endpoint::Unix(_) | protocol::Endpoint::Shm(_) => {
            Err("--listen takes HOST:PORT; use --unix PATH or --shm PATH".into())
        }
        tcp => Ok(tcp),
    }
}

fn scale(args: ScaleArgs) -> anyhow::Result<ExitCode> {
    use bench::scale::{default_threads, machine_cores, parse_configurations, parse_threads};
    let name = args.workload.name();
    let cores = machine_cores();
    let threads = match &args.threads {
        Some(list) => parse_threads(list)?,
        None => default_threads(cores),
    };
    let configurations = match &args.configs {
        Some(list) => parse_configurations(name, list)?,
        None => Configuration::default_for(name),
    };
    let scales = Scales::resolve(name, &configurations, args.data.scale, args.shared_scale)?;
    // Validated for each thread count by the sweep, before it runs anything.
    let setup = &args.engine;
    setup.refuse_a_ring_without_the_file()?;
    let switches = build_switches(preset_name(setup.preset), &setup.switches, 1)?;
    let mut base = BenchConfig::new(name);
    base.options = run_options(args.workload, &args.data, &args.mix);
    base.stop = Stop::Duration(Duration::from_secs_f64(args.duration));
    base.warmup = Duration::from_secs_f64(args.warmup);
    base.db = args.log_file.apply(engine_db(setup, switches));
    base.seed = args.seed;
    let config = bench::scale::ScaleConfig {
        base,
        threads,
        configurations,
        scales,
        rounds: args.rounds,
        dir: args.dir,
        out: args.out,
        json: args.json,
        command_line: std::env::args().collect::<Vec<_>>().join(" "),
        cores,
        // The processes of a `processes` point run this very command again, so that each
        // runs with exactly its engine and workload options.
        process_args: std::env::args_os().skip(1).collect(),
    };
    // Ctrl-C or SIGTERM ends the point running and the sweep, which reports the points run
    // before it; a `processes` point's processes end their runs the same way.
    end_runs_on_interrupt()?;
    if let (Some(seed), Some(out)) = (args.process_seed, &args.process_out) {
        bench::scale::run_process_point(&config, seed, out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let result = bench::scale::run_scale(&config)?;
    println!("{}", result.render().trim_end());
    for figure in &result.figures {
        eprintln!("wrote {figure}");
    }
    Ok(exit_status(result.consistent(), result.interrupted))
}

fn load(args: LoadArgs) -> anyhow::Result<ExitCode> {
    let options = workload_options(args.workload, &args.data);
    let db = args.log_file.apply(DbConfig {
        path: Some(args.db.clone()),
        pool_mib: args.pool_mib as usize,
        accept_log_loss: args.accept_log_loss,
        ..DbConfig::default()
    });
    let took = run_load(args.workload.name(), &options, &db, false)?;
    println!(
        "loaded {} (scale {}) into {} in {:.2} s",
        args.workload.name(),
        options.scale,
        args.db.display(),
        took.as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

/// Integrity faults `glass check` prints; it counts the rest.
const CHECK_FAULTS_SHOWN: usize = 20;

fn check(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let db = args.log_file.apply(DbConfig {
        path: Some(args.db.clone()),
        pool_mib: args.pool_mib as usize,
        accept_log_loss: args.accept_log_loss,
        ..DbConfig::default()
    });
    bench::capacity::check_machine(
        args.workload.name(),
        &WorkloadOptions::default(),
        &db,
        false,
    )?;
    let outcome = run_check(args.workload.name(), &db, args.ack_log.as_deref());
    if let Some(path) = &args.json {
        let value = bench::check_report::check_json(
            args.workload.name(),
            &args.db.display().to_string(),
            outcome.as_ref(),
        );
        std::fs::write(path, format!("{value:#}\n"))
            .with_context(|| format!("write {}", path.display()))?;
    }
    let outcome = outcome?;
    if let Some(recovery) = &outcome.recovery {
        println!("recovery: {recovery}");
    }
    if let Some(d) = outcome.doublewrite.filter(|d| d.pages > 0) {
        println!(
            "doublewrite: {} pages written back through the doublewrite file, in {} batches",
            d.pages, d.batches
        );
    }
    let integrity = &outcome.integrity;
    if integrity.pages_only {
        println!(
            "integrity: verified {} pages of the page file (the database could not be opened, \
             so its structures were not verified)",
            integrity.pages
        );
    } else {
        println!(
        "integrity: verified {} pages; {} heaps ({} pages, {} records); {} B+-trees ({} pages; empty \
         leaves: {}); \
         {} index entries against their records; unreached pages (no structure reaches them): {}{}",
        integrity.pages,
        integrity.heaps,
        integrity.heap_pages,
        integrity.records,
        integrity.trees,
        integrity.tree_pages,
        integrity.empty_leaves,
        integrity.entries,
        integrity.unreached_pages,
        match integrity.unlinked_leaves {
            0 => String::new(),
            n => format!(" ({n} of them unlinked B+-tree leaves, which later allocations take)"),
        }
    );
    }
    for fault in integrity.faults.iter().take(CHECK_FAULTS_SHOWN) {
        println!("✗ {fault}");
    }
    let shown = integrity.faults.len().min(CHECK_FAULTS_SHOWN);
    if integrity.faults_total > shown {
        println!("  ...and {} more", integrity.faults_total - shown);
    }
    if integrity.is_clean() {
        println!("integrity: no fault in {}", args.db.display());
    } else {
        println!(
            "integrity: {} fault{} in {}",
            integrity.faults_total,
            if integrity.faults_total == 1 { "" } else { "s" },
            args.db.display()
        );
    }
    match &outcome.conditions {
        None => println!(
            "consistency conditions not evaluated: the database failed its integrity check"
        ),
        Some(conditions) => {
            for c in conditions {
                match &c.violation {
                    None => println!("✓ {}: {}", c.name, c.description),
                    Some(found) => println!("✗ {}: {} — {}", c.name, c.description, found),
                }
            }
            let held = conditions.iter().filter(|c| c.holds()).count();
            println!(
                "{held} of {} conditions hold in {}",
                conditions.len(),
                args.db.display()
            );
        }
    }
    match (&outcome.acks, &args.ack_log) {
        (Some(acks), _) => println!("{}", acks.render()),
        (None, Some(path)) => println!(
            "ack log {} not looked up: the database failed its integrity check",
            path.display()
        ),
        (None, None) => {}
    }
    Ok(if outcome.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn ladder_child(args: LadderChildArgs) -> anyhow::Result<ExitCode> {
    use bench::ladder::measure::{run_rung, Phase, RungRun};
    let phases = args
        .phases
        .split(',')
        .map(Phase::from_name)
        .collect::<Result<Vec<_>, _>>()
        .map_err(UsageError)?;
    let run = RungRun {
        rung: args.rung,
        phases,
        txns: args.txns,
        warmup: args.warmup,
        items: args.items,
        customers: args.customers,
        seed: args.seed,
    };
    let outcome = run_rung(&run)?;
    println!("{}", serde_json::to_string(&outcome)?);
    Ok(ExitCode::SUCCESS)
}

fn ladder(args: LadderArgs) -> anyhow::Result<ExitCode> {
    use bench::ladder::measure::Phase;
    use bench::ladder::{run_ladder, LadderConfig};
    let LadderWorkload::Tpcc = args.workload;
    let txn = match args.txn {
        LadderTxn::NewOrder => Phase::NewOrder,
        LadderTxn::Payment => Phase::Payment,
        LadderTxn::Mix => Phase::Mix,
    };
    let config = LadderConfig {
        phases: LadderConfig::phases_for(txn),
        txns: args.txns,
        native_txns: args
            .native_txns
            .unwrap_or(args.txns.saturating_mul(bench::ladder::NATIVE_TXNS_FACTOR)),
        out: args.out.clone(),
        jobs: args.jobs as usize,
        items: args.items,
        customers: args.customers,
        warmup: 200,
        seed: 42,
        exe: std::env::current_exe()?,
        progress: true,
    };
    let result = run_ladder(&config)?;
    println!(
        "{}",
        std::fs::read_to_string(args.out.join("ladder.md"))?.trim_end()
    );
    eprintln!(
        "wrote {} (ladder.md, ladder.json, figures) in {:.0} s",
        args.out.display(),
        result.wall_s
    );
    match &result.valgrind {
        Ok(_)
            if result
                .rungs
                .iter()
                .any(|r| r.callgrind_error.is_some() || r.native_error.is_some()) =>
        {
            anyhow::bail!(
                "some rungs failed; see the findings in {}",
                args.out.join("ladder.md").display()
            )
        }
        Ok(_) => Ok(ExitCode::SUCCESS),
        Err(why) => anyhow::bail!(
            "{why} (native timings were written to {})",
            args.out.display()
        ),
    }
}

fn profile(args: ProfileArgs) -> anyhow::Result<ExitCode> {
    args.engine.refuse_file_options_in_memory()?;
    let setup = &args.engine.setup;
    let switches = build_switches(preset_name(setup.preset), &setup.switches, 1)?;
    bench::optimal::refuse_kernel(&switches, "glass profile")?;
    let mut options = workload_options(args.workload, &args.data);
    options.mix = mix_of(args.mix);
    let letter = args.ycsb_workload.unwrap_or(options.ycsb_workload);
    options.ycsb_workload = letter;
    options.ycsb_distribution = Distribution::standard_for(letter);
    // A loaded database is profiled at the scale it was loaded with unless --scale says
    // otherwise (then a mismatch is refused); sizes are checked before anything is built.
    let loading = match &args.engine.db {
        Some(dir) => match bench::run::inspect_dir(dir)? {
            Some(manifest) => {
                if args.data.scale.is_none() {
                    options.scale = manifest.scale;
                }
                false
            }
            None => true,
        },
        None => true,
    };
    let mut sized = DbConfig {
        path: args.engine.db.clone(),
        ..engine_db(setup, switches)
    };
    sized.pool_mib = setup.pool_mib.map_or_else(
        || {
            let run = bench::capacity::RunLength::Counted {
                threads: 1,
                txns: args.warmup_txns + args.txns,
                warmup_seconds: 0.0,
            };
            bench::capacity::default_pool_mib(args.workload.name(), &options, &sized, run)
        },
        |m| m as usize,
    );
    bench::capacity::check_machine(args.workload.name(), &options, &sized, loading)?;
    let counts = bench::table4::Counts {
        warmup: args.warmup_txns,
        txns: args.txns,
    };
    if args.child {
        let workload = workloads::by_name(args.workload.name(), &options).map_err(UsageError)?;
        let db = args
            .engine
            .device
            .apply(args.engine.log_file.apply(DbConfig {
                path: args.engine.db,
                pool_mib: sized.pool_mib,
                durable: args.engine.durable,
                accept_log_loss: args.engine.accept_log_loss,
                threads: 1,
                ..engine_db(setup, switches)
            }));
        let runs = bench::ladder::profile::run_child(workload, &options, &db, counts, args.seed)?;
        println!("{}", serde_json::to_string(&runs)?);
        return Ok(ExitCode::SUCCESS);
    }
    let workload = workloads::by_name(args.workload.name(), &options).map_err(UsageError)?;
    let db = args
        .engine
        .device
        .apply(args.engine.log_file.apply(DbConfig {
            path: args.engine.db.clone(),
            pool_mib: sized.pool_mib,
            durable: args.engine.durable,
            accept_log_loss: args.engine.accept_log_loss,
            threads: 1,
            ..engine_db(setup, switches)
        }));
    let set_up_for = args.threads.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        |n| n as usize,
    );
    let types = bench::table4::run(workload, &options, &db, set_up_for, counts, args.seed)?;
    println!(
        "{} (1 thread; set up for {set_up_for}), per transaction: records accessed, row-level locks \
         taken (a read-committed read's, let go as it ends, included) and higher-level locks \
         held, heap and index pages fixed (total) and unique pages, log bytes \
         (the records', and the padding that closed a thread's run of reserved log bytes), \
         latch acquisitions, lock waits, lock-manager time (Lock, physical and logical \
         contention), shared writes (latches taken and read-modify-writes on memory every thread \
         writes)",
        args.workload.name()
    );
    print!("{}", bench::table4::render(&types));
    println!();
    print!("{}", bench::table4::render_shared(&types));
    let allocations = bench::table4::render_allocations(&types);
    if !allocations.is_empty() {
        println!();
        print!("{allocations}");
    }
    if !args.instructions {
        return Ok(ExitCode::SUCCESS);
    }
    let forwarded: Vec<String> = std::env::args().skip(1).collect();
    let table = bench::ladder::profile::run_parent(
        &std::env::current_exe()?,
        &forwarded,
        args.out.as_deref(),
    )?;
    println!("\ninstructions per transaction by component (callgrind):");
    print!("{table}");
    Ok(ExitCode::SUCCESS)
}

fn crash(args: CrashArgs) -> anyhow::Result<ExitCode> {
    use bench::crash::{lanes_of, run_campaign, CampaignConfig};
    use std::io::IsTerminal;
    let names: Vec<String> = args
        .workloads
        .iter()
        .map(|w| w.name().to_string())
        .collect();
    let config = CampaignConfig {
        exe: std::env::current_exe()?,
        dir: args.dir,
        lanes: lanes_of(&names, &args.via),
        kills: args.kills,
        jobs: args.jobs as usize,
        max_run: Duration::from_secs_f64(args.max_run),
        seed: args.seed,
        threads: args.threads as usize,
        checkpoint_kib: args.checkpoint_kib,
        pool_mib: args.pool_mib,
        tear_writes: args.tear_writes,
        power_loss: args.power_loss,
        time_limit: args.time_limit.map(Duration::from_secs_f64),
        progress: std::io::stderr().is_terminal(),
        stop: Arc::new(AtomicBool::new(false)),
    };
    // Ctrl-C or SIGTERM ends the campaign in order: its running rounds killed and left
    // unchecked, its file systems unmounted, the table printed for the rounds it checked.
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&config.stop))
            .context("install a signal handler")?;
    }
    if let Some(path) = &args.json {
        // Before the campaign: a path that cannot be written fails now.
        std::fs::write(path, "")
            .map_err(|e| anyhow::anyhow!("cannot write --json {}: {e}", path.display()))?;
    }
    let result = run_campaign(&config)?;
    print!("{}", result.render());
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&result)? + "\n")
            .map_err(|e| anyhow::anyhow!("write {}: {e}", path.display()))?;
    }
    Ok(if !result.holds() {
        ExitCode::from(1)
    } else if result.interrupted {
        // As a shell reports a command SIGINT ended.
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}

fn preset_name(preset: PresetName) -> &'static str {
    match preset {
        PresetName::Full => "full",
        PresetName::Stripped => "stripped",
        PresetName::Optimal => "optimal",
    }
}

/// An error and its causes on one line, each cause once: the storage and log errors put
/// their cause in their own message and also chain it, and a log error inside an I/O error
/// brings its own again, so a plain `{:#}` printed the same words two or three times.
fn chain_once(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if text.is_empty() || out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// Collapses clap's multi-line error into one line: the message, with its tip or the valid
/// values, without the usage block and the "--help" hint.
fn one_line(err: &clap::Error) -> String {
    err.render()
        .to_string()
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more information")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The system allocator, counting each thread's allocations for `glass profile`.
#[global_allocator]
static ALLOCATOR: bench::allocator::Counting = bench::allocator::Counting;

fn main() -> ExitCode {
    // Large, growing buffers are moved by remapping, not copied (see `bench::allocator`).
    bench::allocator::tune();
    let parsed = Cli::command()
        .try_get_matches()
        .and_then(|matches| Ok((Cli::from_arg_matches(&matches)?, matches)));
    let (cli, matches) = match parsed {
        Ok(parsed) => parsed,
        Err(err) => {
            use clap::error::ErrorKind;
            return match err.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                    let _ = err.print();
                    ExitCode::SUCCESS
                }
                ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    let _ = err.print();
                    ExitCode::from(2)
                }
                _ => {
                    eprintln!("{}", one_line(&err));
                    ExitCode::from(2)
                }
            };
        }
    };
    if let Some(("bench", bench_matches)) = matches.subcommand() {
        if let Err(usage) = refuse_engine_options_with_server(bench_matches) {
            eprintln!("error: {usage}");
            return ExitCode::from(2);
        }
    }
    let outcome = match cli.command {
        Command::Bench(args) => bench(args),
        Command::Load(args) => load(args),
        Command::Check(args) => check(args),
        Command::Ladder(args) => ladder(args),
        Command::Profile(args) => profile(args),
        Command::Scale(args) => scale(args),
        Command::Serve(args) => serve(args),
        Command::Guest(args) => guest(args),
        Command::Latency(args) => latency(args),
        Command::Section3(args) => section3(args),
        Command::Isolation(args) => isolation(args),
        Command::Charm(args) => charm(args),
        Command::Crash(args) => crash(args),
        Command::LadderChild(args) => ladder_child(args),
    };
    match outcome {
        Ok(code) => code,
        Err(err) => {
            if let Some(usage) = err.chain().find_map(|e| e.downcast_ref::<UsageError>()) {
                eprintln!("error: {usage}");
                ExitCode::from(2)
            } else {
                eprintln!("error: {}", chain_once(&err));
                ExitCode::from(1)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::chain_once;

    #[test]
    fn each_cause_is_printed_once() {
        let io = std::io::Error::from_raw_os_error(21);
        let storage = storage::StorageError::io("open log", io);
        let err = anyhow::Error::new(engine::TxError::Storage(storage)).context("open database");
        let line = chain_once(&err);
        assert_eq!(line.matches("os error 21").count(), 1, "{line}");
        assert!(
            line.starts_with("open database: i/o error while open log: "),
            "{line}"
        );
        // A cause not yet said is kept.
        let err = anyhow::anyhow!("disk full").context("write the ack log");
        assert_eq!(chain_once(&err), "write the ack log: disk full");
    }
}
