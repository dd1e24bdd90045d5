//! The result of a benchmark run: a record keyed by its full configuration, written as JSON,
//! and the table printed at the end of `glass bench`.
//!
//! JSON fields (one object per run; durations in seconds, latencies in microseconds):
//!
//! | field                         | meaning                                                  |
//! |-------------------------------|----------------------------------------------------------|
//! | `glass_version`, `timestamp`  | build that ran, UTC start time (RFC 3339)                |
//! | `workload`, `mix`, `scale`    | what ran (`mix` is TPC-C's `full` or `paper`)            |
//! | `ycsb_workload`, `distribution` | YCSB only                                              |
//! | `preset`, `switches`          | preset name or `custom`; names of the switches that are off |
//! | `threads`, `seed`, `durable`, `pool_mib`, `db` | how it ran (`db`: null = in memory)     |
//! | `prefetch`                    | prefetch hints acted on (false with `--no-prefetch`)     |
//! | `log_runs`                    | log-buffer bytes reserved a run at a time (false with `--no-log-runs`) |
//! | `log_run_bytes`               | the bytes of a run (`--log-run-bytes`; 0 where runs are off) |
//! | `huge_pages`                  | the pool's images asked for in huge pages (true with `--huge-pages`) |
//! | `log_sync`, `log_prealloc_mib`, `log_segment_mib` | how the log file is forced, MiB of zeros kept ahead of its end, MiB of each of its segment files (absent in memory; reports written before segments lack the last) |
//! | `commit_gather`, `early_lock_release` | group commit's leader gathers committers (`--commit-gather`); locks released before the force (on unless `--no-early-lock-release`); both false unless the log is forced |
//! | `page_cleaners`               | page cleaner threads (`--page-cleaners`; 0 in memory)    |
//! | `full_page_images`            | a page's first change since it was clean logged as its whole image (`--full-page-images`: on disk, databases with `--doublewrite off` by default; false in memory) |
//! | `doublewrite`                 | pages written back through a doublewrite file (`--doublewrite`: on disk, every database by default; false in memory) |
//! | `warmup_s`, `duration_s`, `load_s` | warm-up, measured phase, load (null: not loaded) |
//! | `txn_count`                   | completed transactions: `commits + rollbacks`            |
//! | `commits`, `rollbacks`, `aborts` | commits; rollbacks the procedure asked for; retried aborts |
//! | `tps`                         | `txn_count / duration_s`                                 |
//! | `rounds`                      | each measured round (`--rounds`): `{txn_count, duration_s, tps, p50_us, p99_us}` |
//! | `tps_median`                  | the median of the rounds' `tps` (with one round, `tps`)  |
//! | `p50_us` `p90_us` `p99_us` `p999_us` `max_us` | latency over all types               |
//! | `checkpoints`                 | on disk: `{background, in_commits, waits, total_us, longest_us}`, fuzzy checkpoints by the checkpointer thread and by committers, commits that waited for the thread, and the time the checkpoints took, in all and the longest (a checkpoint in a commit is that commit's wait; warm-ups included) |
//! | `log`                         | the log's work (warm-ups included; absent without a log): `{commits, forces, writes, bytes, forces_per_commit, commits_per_batch, gather_us_per_force}`; the two ratios are null where no commit asked for a force (without `--durable`, where `forces` counts the syncs ahead of pages written back and checkpoints') |
//! | `pool`                        | where the pool read or wrote: `{pool_mib, in_memory, reads, writes, evict_writes, cleaner_writes}`, the writes a miss made to free a dirty victim and those page cleaners made among them (warm-ups included); `image_bytes` of full-page images logged; the doublewrite file's `doublewrite_batches`, `doublewrite_pages`, `doublewrite_page_file_syncs`, `doublewrite_writer_batches` since the open and its ring's length, `doublewrite_ring_bytes` (0 without the file); `leaves_retired`, `leaves_adopted`, `pages_reused` |
//! | `consistency`                 | `"ok"`, `"failed: NAME (detail); ..."`, or (`--server`) `"checked by the server"` (`--mode autocommit`: `"checked by the server; autocommit is not atomic"`) |
//! | `conditions`                  | every condition: `name`, `description`, `holds`, `detail` |
//! | `by_type`                     | `{NAME: {count, commits, rollbacks, aborts, tps, p50_us, ...}}` in the workload's order |

use std::fmt::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use workloads::Condition;

use crate::cpu_idle::CpuIdle;
use crate::stats::{LatencySummary, RunStats, TypeStats};

/// Everything about a run's configuration that its result records.
#[derive(Clone, Debug, Serialize)]
pub struct RunConfiguration {
    pub glass_version: String,
    pub timestamp: String,
    pub workload: String,
    pub mix: String,
    pub scale: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ycsb_workload: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distribution: Option<String>,
    pub preset: String,
    /// Switches that are off, in ladder order.
    pub switches: Vec<String>,
    pub threads: usize,
    pub seed: u64,
    pub durable: bool,
    /// Whether the engine acted on the procedures' prefetch hints (`--no-prefetch` clears it).
    pub prefetch: bool,
    /// Whether threads reserved log-buffer bytes a run at a time (`--no-log-runs` clears
    /// it; reports written before runs lack it: they reserved record by record).
    pub log_runs: bool,
    /// Whether the pool's page images were asked for in transparent huge pages
    /// (`--huge-pages`; reports written before lack it: they had small pages).
    pub huge_pages: bool,
    /// The bytes a run reserved (`--log-run-bytes`); 0 where runs were off.
    pub log_run_bytes: usize,
    pub pool_mib: usize,
    /// Database directory; `None` in memory.
    pub db: Option<String>,
    /// How the log file's writes become durable (`--log-sync`); `None` without a log file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_sync: Option<String>,
    /// MiB of zeros kept written ahead of the log file's end; `None` without a log file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_prealloc_mib: Option<u64>,
    /// MiB of each of the log's segment files (`--log-segment-mib`); `None` without a log
    /// file (and in reports written before segments).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_segment_mib: Option<u64>,
    /// Whether a group commit's leader gathered committers (`--commit-gather`, with a forced
    /// log only).
    pub commit_gather: bool,
    /// Page cleaner threads (`--page-cleaners`; 0 in memory, where none runs).
    pub page_cleaners: usize,
    /// Whether a page's first change since it was clean was logged as its whole image
    /// (`--full-page-images`: on disk, databases with `--doublewrite off` by default; false
    /// in memory).
    pub full_page_images: bool,
    /// Whether pages were written back through a doublewrite file (`--doublewrite`: on disk,
    /// every database by default).
    pub doublewrite: bool,
    /// Whether committers released their locks before the force (on unless
    /// `--no-early-lock-release`; with a forced log only).
    pub early_lock_release: bool,
    pub warmup_s: f64,
    /// Seconds spent loading; `None` when an existing database was used.
    pub load_s: Option<f64>,
    /// How the machine's idle CPUs wait, which every wake-up of a sleeping thread pays for
    /// (reports written before lack it).
    pub cpu_idle: CpuIdle,
}

/// One transaction type's results.
#[derive(Clone, Debug, Serialize)]
pub struct TypeResult {
    #[serde(skip)]
    pub name: String,
    pub count: u64,
    pub commits: u64,
    pub rollbacks: u64,
    pub aborts: u64,
    pub tps: f64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
}

impl TypeResult {
    fn of(name: &str, stats: &TypeStats, elapsed: Duration) -> TypeResult {
        let LatencySummary {
            p50_us,
            p90_us,
            p99_us,
            p999_us,
            max_us,
        } = stats.latency();
        TypeResult {
            name: name.to_string(),
            count: stats.count(),
            commits: stats.commits,
            rollbacks: stats.rollbacks,
            aborts: stats.aborts,
            tps: per_second(stats.count(), elapsed),
            p50_us,
            p90_us,
            p99_us,
            p999_us,
            max_us,
        }
    }
}

/// One measured round of a run (`glass bench --rounds N`: N rounds after one load, each with
/// its own warm-up and terminals).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RoundResult {
    pub txn_count: u64,
    pub duration_s: f64,
    pub tps: f64,
    pub p50_us: u64,
    pub p99_us: u64,
}

impl RoundResult {
    /// The round's totals from its statistics over all types (`RunStats::overall`).
    pub fn of(overall: &TypeStats, elapsed: Duration) -> RoundResult {
        let latency = overall.latency();
        RoundResult {
            txn_count: overall.count(),
            duration_s: elapsed.as_secs_f64(),
            tps: per_second(overall.count(), elapsed),
            p50_us: latency.p50_us,
            p99_us: latency.p99_us,
        }
    }
}

/// The median of `values` (the mean of the middle two for an even count; 0 for none).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// One consistency condition's outcome.
#[derive(Clone, Debug, Serialize)]
pub struct ConditionResult {
    pub name: String,
    pub description: String,
    pub holds: bool,
    /// What was found when it does not hold.
    pub detail: Option<String>,
}

impl From<&Condition> for ConditionResult {
    fn from(c: &Condition) -> Self {
        ConditionResult {
            name: c.name.clone(),
            description: c.description.clone(),
            holds: c.holds(),
            detail: c.violation.clone(),
        }
    }
}

/// The result of one `glass bench` run.
#[derive(Clone, Debug, Serialize)]
pub struct BenchResult {
    #[serde(flatten)]
    pub config: RunConfiguration,
    pub duration_s: f64,
    pub txn_count: u64,
    pub commits: u64,
    pub rollbacks: u64,
    pub aborts: u64,
    pub tps: f64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
    /// Every measured round; the fields above cover all of them together.
    pub rounds: Vec<RoundResult>,
    pub tps_median: f64,
    pub consistency: String,
    pub conditions: Vec<ConditionResult>,
    #[serde(serialize_with = "types_as_map")]
    pub by_type: Vec<TypeResult>,
    /// What the log did during the run (warm-ups included), when the engine kept one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<LogSummary>,
    /// Fuzzy checkpoints during the run (warm-ups included), on disk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoints: Option<CheckpointSummary>,
    /// Pages the buffer pool read from and wrote to its store during the run (warm-ups
    /// included), when the engine has a pool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<PoolSummary>,
    /// What the lock manager's waits cost during the run (warm-ups included), when the
    /// engine locks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locks: Option<LockSummary>,
    /// The last deadlock the lock manager broke, told with table and index names
    /// (`engine::Database::last_deadlock`), when the run had any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_deadlock: Option<String>,
    /// TPC-C: committed New-Order transactions per minute of the measured time (tpmC; deadlock
    /// aborts and rollbacks excluded), the metric of the 1992 TPC-C and of the Charm paper.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_order_tpm: Option<f64>,
    /// The execution strategy's per-type accounting, when one was chosen (`--execution`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution: Option<ExecutionSummary>,
    /// Page-latch handoffs between threads, when asked for (`--handoffs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handoffs: Option<HandoffSummary>,
    /// The share of the machine's CPU time that other processes and the hypervisor took
    /// while the run ran, warm-up included ([`crate::machine_cpu`]); an embedded run's only
    /// (over the network the server is another process).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub others_cpu_share: Option<f64>,
    /// Ended early by Ctrl-C (SIGINT) or SIGTERM: the figures cover `duration_s` measured,
    /// less than asked (and the rounds measured, fewer than asked).
    pub interrupted: bool,
}

/// Page-latch handoffs (`storage::buffer::handoff`) from the first measured phase to the end
/// of the run: latched fixes of a page whose last latched fix was another thread's, by the
/// page's kind, and per measured transaction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct HandoffSummary {
    pub btree_inner: u64,
    pub btree_leaf: u64,
    pub heap: u64,
    pub other: u64,
    /// The measured transactions they are counted over.
    pub txns: u64,
    pub per_txn: f64,
}

impl HandoffSummary {
    /// `counted` over `txns` measured transactions.
    pub fn of(counted: storage::buffer::Handoffs, txns: u64) -> HandoffSummary {
        HandoffSummary {
            btree_inner: counted.btree_inner,
            btree_leaf: counted.btree_leaf,
            heap: counted.heap,
            other: counted.other,
            txns,
            per_txn: counted.total() as f64 / txns.max(1) as f64,
        }
    }

    /// The report's line.
    pub fn render(&self) -> String {
        let each = |n: u64| n as f64 / self.txns.max(1) as f64;
        format!(
            "handoffs: {:.3} page latches a transaction taken after another thread's (B+-tree \
             inner {:.3}, leaf {:.3}, heap {:.3}, other {:.3}; from the first measured phase on)",
            self.per_txn,
            each(self.btree_inner),
            each(self.btree_leaf),
            each(self.heap),
            each(self.other)
        )
    }
}

/// What an execution strategy did over the measured phase, per transaction type.
#[derive(Clone, Debug, Serialize)]
pub struct ExecutionSummary {
    pub strategy: String,
    /// CPU spun per run of a body, in milliseconds.
    pub spin_ms: f64,
    pub page_size: usize,
    /// `(type, totals)` in the workload's type order.
    pub by_type: Vec<(String, engine::execution::TypeSummary)>,
    /// HTSTE's classifications, in order (warm-up included).
    pub decisions: Vec<engine::execution::Decision>,
}

impl ExecutionSummary {
    pub fn of(executor: &engine::execution::Executor, page_size: usize) -> ExecutionSummary {
        ExecutionSummary {
            strategy: executor.config().strategy.name().to_string(),
            spin_ms: executor.config().spin.as_secs_f64() * 1e3,
            page_size,
            by_type: executor
                .names()
                .iter()
                .cloned()
                .zip(executor.totals())
                .collect(),
            decisions: executor.decisions(),
        }
    }

    /// One type's totals by name.
    pub fn get(&self, name: &str) -> Option<&engine::execution::TypeSummary> {
        self.by_type.iter().find(|(n, _)| n == name).map(|(_, t)| t)
    }

    /// The per-type table `glass bench` prints.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let w = self
            .by_type
            .iter()
            .map(|(n, _)| n.len())
            .chain([5])
            .max()
            .unwrap_or(5);
        let _ = writeln!(
            out,
            "execution: {}{}",
            self.strategy,
            if self.spin_ms > 0.0 {
                format!(
                    ", {:.1} ms of CPU added to each run of a body",
                    self.spin_ms
                )
            } else {
                String::new()
            }
        );
        let _ = writeln!(
            out,
            "{:<w$} {:>8} {:>6} {:>6} {:>6} {:>7} {:>6} {:>9} {:>9} {:>8} {:>9} {:>8} {:>7} {:>10}",
            "type",
            "count",
            "conv",
            "tste",
            "otste",
            "hit %",
            "I/O %",
            "misfetch%",
            "converted",
            "lock ms",
            "lock@I/O%",
            "I/O ms",
            "ms/I/O",
            "pinned KiB"
        );
        for (name, t) in &self.by_type {
            let _ = writeln!(
                out,
                "{:<w$} {:>8} {:>6} {:>6} {:>6} {:>7.2} {:>6.1} {:>9.2} {:>9} {:>8.2} {:>9.1} {:>8.2} {:>7.2} {:>10.0}",
                name,
                t.instances,
                t.ran_conventional,
                t.ran_tste,
                t.ran_otste,
                t.hit_percent(),
                t.io_percent(),
                t.mis_prefetch_percent(),
                t.converted,
                t.lock_wait_ms(),
                t.lock_wait_io_percent(),
                t.io_ms(),
                t.ms_per_io(),
                t.pinned_kib(self.page_size)
            );
        }
        let _ = writeln!(
            out,
            "(per instance, committed or not: hit % of page fixes found in the pool; I/O % did a \
             physical read or write; misfetch% read in the operate stage after a fetch stage; \
             lock ms waited for locks, lock@I/O% of it while a transaction on the blocking chain \
             was in a physical read; I/O ms in reads and write-backs, ms/I/O each)"
        );
        for d in &self.decisions {
            let _ = writeln!(
                out,
                "htste at {:.1} s: {} {} -> {} (after {} instances: mis-prefetch {:.1}%, needed I/O {:.1}%)",
                d.at_ms as f64 / 1e3,
                d.txn_type,
                d.from.unwrap_or("start"),
                d.to,
                d.instances,
                100.0 * d.mis_prefetch_ratio,
                100.0 * d.conversion_ratio
            );
        }
        out
    }
}

/// The lock manager's waits over a run: how many requests waited, how long, whether the
/// waiter saw its grant spinning or asleep, and its wake-up latency (grant to running
/// again; the percentiles are the ends of the log2 histogram buckets that hold them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LockSummary {
    pub requests: u64,
    pub waits: u64,
    pub deadlocks: u64,
    pub timeouts: u64,
    pub wait_us_mean: f64,
    pub waits_ended_spinning: u64,
    pub waits_ended_sleeping: u64,
    pub wake_us_mean: f64,
    pub wake_us_p50: f64,
    pub wake_us_p99: f64,
    pub wake_us_max: f64,
}

impl LockSummary {
    /// The difference between two snapshots of a lock manager's totals, `after - before`
    /// (the maximum is the run's, warm-up included).
    pub fn between(before: &txn::LockStats, after: &txn::LockStats) -> LockSummary {
        let mut run = *after;
        run.requests -= before.requests;
        run.waits -= before.waits;
        run.deadlocks -= before.deadlocks;
        run.timeouts -= before.timeouts;
        run.wait_ns -= before.wait_ns;
        run.waits_ended_spinning -= before.waits_ended_spinning;
        run.waits_ended_sleeping -= before.waits_ended_sleeping;
        run.wake_ns -= before.wake_ns;
        for (a, b) in run.wake_histogram.iter_mut().zip(before.wake_histogram) {
            *a -= b;
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        LockSummary {
            requests: run.requests,
            waits: run.waits,
            deadlocks: run.deadlocks,
            timeouts: run.timeouts,
            wait_us_mean: us(run.wait_ns.checked_div(run.waits).unwrap_or(0)),
            waits_ended_spinning: run.waits_ended_spinning,
            waits_ended_sleeping: run.waits_ended_sleeping,
            wake_us_mean: us(run.wake_ns_mean()),
            wake_us_p50: us(run.wake_ns_quantile(0.5)),
            wake_us_p99: us(run.wake_ns_quantile(0.99)),
            wake_us_max: us(run.wake_ns_max),
        }
    }
}

/// The fuzzy checkpoints of a run, by who took them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CheckpointSummary {
    /// Taken by the checkpointer thread.
    pub background: u64,
    /// Taken by committing transactions (without `--background-checkpoints`).
    pub in_commits: u64,
    /// Commits that waited for the thread's checkpoint, the thread having fallen behind.
    pub waits: u64,
    /// Microseconds the checkpoints took, in all and the longest: a checkpoint taken in a
    /// commit is that commit's wait.
    pub total_us: u64,
    pub longest_us: u64,
}

/// The buffer pool's traffic with its store over a run. In memory a page read back means the
/// data outgrew the pool: the run copied pages to and from the in-memory store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PoolSummary {
    pub pool_mib: usize,
    /// Whether the store is in memory (no `--db`).
    pub in_memory: bool,
    pub reads: u64,
    pub writes: u64,
    /// Of `writes`, those a transaction's miss made to free a dirty victim (it waited for
    /// them), and those the page cleaners made (`--page-cleaners`).
    pub evict_writes: u64,
    pub cleaner_writes: u64,
    /// Bytes of full-page images the pool logged (`--full-page-images`).
    pub image_bytes: u64,
    /// Batches written through the doublewrite file, the pages they carried, and the page
    /// file's syncs (every half round of the file's ring of slots, and at checkpoints), since the
    /// database opened (`--doublewrite`; 0 without it).
    pub doublewrite_batches: u64,
    pub doublewrite_pages: u64,
    pub doublewrite_page_file_syncs: u64,
    /// Of `doublewrite_batches`, those the file's writer thread wrote as they filled; the rest
    /// waited in the thread whose page found the batch full, or in a checkpoint's sync.
    pub doublewrite_writer_batches: u64,
    /// The doublewrite file's ring: bytes of pages its slots hold (a quarter of the page file
    /// at the open, 16–64 MiB, or `--doublewrite-ring-mib`; 0 without the file).
    pub doublewrite_ring_bytes: u64,
    /// Pages of B+-tree nodes taken out of their trees since the database opened (emptied
    /// leaves, and inner nodes drained with them), those an earlier run left unlinked (found
    /// when it opened), and of both the ones allocated again
    /// (`storage::BufferPool::reuse_stats`; 0 with reuse off).
    pub leaves_retired: u64,
    pub leaves_adopted: u64,
    pub pages_reused: u64,
}

impl PoolSummary {
    /// What `db`'s pool (of `config`) read and wrote since `before` (its `io()` then).
    pub fn since(
        db: &engine::db::Database,
        config: &engine::db::DbConfig,
        before: Option<storage::buffer::PoolIo>,
    ) -> Option<PoolSummary> {
        let (pool, before) = db.pool().zip(before)?;
        let io = pool.io().since(&before);
        let reuse = pool.reuse_stats();
        let doublewrite = db.doublewrite().unwrap_or_default();
        Some(PoolSummary {
            pool_mib: config.pool_mib,
            in_memory: config.path.is_none(),
            reads: io.reads,
            writes: io.writes,
            evict_writes: io.evict_writes,
            cleaner_writes: io.cleaner_writes,
            image_bytes: io.image_bytes,
            doublewrite_batches: doublewrite.batches,
            doublewrite_pages: doublewrite.pages,
            doublewrite_page_file_syncs: doublewrite.page_file_syncs,
            doublewrite_writer_batches: doublewrite.writer_batches,
            doublewrite_ring_bytes: doublewrite.ring_bytes,
            leaves_retired: reuse.retired,
            leaves_adopted: reuse.adopted,
            pages_reused: reuse.reused,
        })
    }

    /// The line on unlinked leaves' pages, or `None` when no leaf was unlinked.
    pub fn render_reuse(&self) -> Option<String> {
        let leaves = self.leaves_retired + self.leaves_adopted;
        (leaves > 0).then(|| {
            let rest = match leaves.saturating_sub(self.pages_reused) {
                0 => String::new(),
                _ => " (the rest wait for the next allocations, or for transactions that began \
                      before their unlink)"
                    .to_string(),
            };
            let which = match self.leaves_adopted {
                0 => "unlinked since the database opened (emptied leaves, and inner nodes \
                      drained with them)"
                    .to_string(),
                n => format!(
                    "unlinked ({n} of them by earlier runs, found when the database opened)"
                ),
            };
            format!(
                "pages: {} of the {leaves} B+-tree pages {which} were allocated again{rest}",
                self.pages_reused
            )
        })
    }

    /// The line on full-page images, or `None` when none was logged: how much of the
    /// `log_bytes` appended over the same `span` they were.
    pub fn render_images(&self, log_bytes: u64, span: &str) -> Option<String> {
        (self.image_bytes > 0).then(|| {
            let mib = |b: u64| b as f64 / (1 << 20) as f64;
            let share = 100.0 * self.image_bytes as f64 / log_bytes.max(self.image_bytes) as f64;
            format!(
                "full-page images: {:.1} MiB logged {span}, {share:.0}% of the {:.1} MiB of log \
                 (--full-page-images)",
                mib(self.image_bytes),
                mib(log_bytes.max(self.image_bytes))
            )
        })
    }

    /// The line on the doublewrite file, or `None` when no batch went through one.
    pub fn render_doublewrite(&self) -> Option<String> {
        (self.doublewrite_batches > 0).then(|| {
            format!(
                "doublewrite: {} page writes went through the doublewrite file first, in {} \
                 batches of a sync each ({} written by its writer thread as they filled) to a \
                 ring of {} MiB, and the page file was synced {} time{}, since the open \
                 (--doublewrite)",
                self.doublewrite_pages,
                self.doublewrite_batches,
                self.doublewrite_writer_batches,
                self.doublewrite_ring_bytes >> 20,
                self.doublewrite_page_file_syncs,
                if self.doublewrite_page_file_syncs == 1 {
                    ""
                } else {
                    "s"
                }
            )
        })
    }

    /// The report's line, or `None` when the pool neither read nor wrote. `span` says over
    /// what the pages were counted, e.g. "(warm-up included)".
    pub fn render(&self, span: &str) -> Option<String> {
        if self.reads == 0 && self.writes == 0 {
            return None;
        }
        Some(if self.in_memory {
            format!(
                "pool: {} pages read back and {} written out {span}: the data outgrew the {} \
                 MiB pool, so this in-memory run copied pages to and from its store; a larger \
                 --pool-mib keeps it in memory",
                self.reads, self.writes, self.pool_mib
            )
        } else {
            let by = match (self.evict_writes, self.cleaner_writes) {
                (0, 0) => String::new(),
                (evict, 0) => format!(" ({evict} by misses freeing a dirty victim)"),
                (evict, cleaner) => {
                    format!(
                        " ({evict} by misses freeing a dirty victim, {cleaner} by page cleaners)"
                    )
                }
            };
            format!(
                "pool: {} page reads and {} page writes{by} {span} through the {} MiB pool",
                self.reads, self.writes, self.pool_mib
            )
        })
    }
}

/// The log's work over a run: commits, and the forces (syncs) and writes that carried them.
/// `forces_per_commit` below 1 is group commit at work: one force made several commits durable.
/// Where no commit asked for a force (a run without `--durable`), `forces` counts the syncs that
/// put the log ahead of a page written back and checkpoints' syncs, and the two ratios, which
/// would read as group commit at work, are null.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LogSummary {
    pub commits: u64,
    pub forces: u64,
    pub writes: u64,
    pub bytes: u64,
    /// `forces / commits` (0 when nothing committed); `None` where commits were not forced.
    pub forces_per_commit: Option<f64>,
    /// Mean commits made durable by one force that made any durable; `None` where commits
    /// were not forced.
    pub commits_per_batch: Option<f64>,
    /// Mean µs a group-commit leader waited, per force, for the committers it expected
    /// (`wal::LogConfig::gather_commits`; 0 when it is off).
    pub gather_us_per_force: f64,
}

impl LogSummary {
    /// The difference between two snapshots of a log's counters, `after - before`, of a run
    /// whose commits asked for a force (`forced_at_commit`: `--durable`) or did not.
    pub fn between(
        before: &wal::LogStats,
        after: &wal::LogStats,
        forced_at_commit: bool,
    ) -> LogSummary {
        let commits = after.commits.saturating_sub(before.commits);
        let forces = after.syncs.saturating_sub(before.syncs);
        let batches = after.commit_batches.saturating_sub(before.commit_batches);
        let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        LogSummary {
            commits,
            forces,
            writes: after.writes.saturating_sub(before.writes),
            bytes: after.bytes.saturating_sub(before.bytes),
            forces_per_commit: forced_at_commit.then(|| ratio(forces, commits)),
            commits_per_batch: forced_at_commit.then(|| ratio(commits, batches)),
            gather_us_per_force: ratio(after.gather_ns.saturating_sub(before.gather_ns), forces)
                / 1000.0,
        }
    }
}

/// Writes `by_type` as a JSON object keyed by type name, in the workload's order.
fn types_as_map<S: Serializer>(types: &[TypeResult], s: S) -> Result<S::Ok, S::Error> {
    let mut map = s.serialize_map(Some(types.len()))?;
    for t in types {
        map.serialize_entry(&t.name, t)?;
    }
    map.end()
}

fn per_second(count: u64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 {
        count as f64 / secs
    } else {
        0.0
    }
}

/// The `consistency` of a run against a server: the database, and so the check, is the
/// server's (`glass serve` checks it when it stops).
pub const CHECKED_BY_SERVER: &str = "checked by the server";

/// The `consistency` of an autocommit run against a server (`--mode autocommit`): each
/// operation commits alone, so a procedure that rolls back, fails or meets a concurrent one
/// midway leaves the rest of its work undone, and the server's check may find the workload's
/// conditions broken by the run itself.
pub const NOT_ATOMIC: &str = "checked by the server; autocommit is not atomic";

/// `"ok"` if every condition holds, else `"failed: "` and the failed ones with their details.
pub fn consistency_summary(conditions: &[Condition]) -> String {
    let failed: Vec<String> = conditions
        .iter()
        .filter_map(|c| c.violation.as_ref().map(|v| format!("{} ({})", c.name, v)))
        .collect();
    if failed.is_empty() {
        "ok".to_string()
    } else {
        format!("failed: {}", failed.join("; "))
    }
}

impl BenchResult {
    /// Assembles the result of a run from its configuration, its merged statistics (indexed
    /// like `txn_names`), the measured phase's length and the consistency check.
    pub fn new(
        config: RunConfiguration,
        txn_names: &[&str],
        stats: &RunStats,
        elapsed: Duration,
        conditions: &[Condition],
    ) -> BenchResult {
        let overall = stats.overall();
        let latency = overall.latency();
        let round = RoundResult::of(&overall, elapsed);
        let new_order_tpm = txn_names
            .iter()
            .position(|n| *n == "new_order")
            .filter(|_| config.workload == "tpcc")
            .map(|i| stats.by_type[i].commits as f64 * 60.0 / elapsed.as_secs_f64().max(1e-9));
        BenchResult {
            tps_median: round.tps,
            rounds: vec![round],
            config,
            duration_s: elapsed.as_secs_f64(),
            txn_count: overall.count(),
            commits: overall.commits,
            rollbacks: overall.rollbacks,
            aborts: overall.aborts,
            tps: per_second(overall.count(), elapsed),
            p50_us: latency.p50_us,
            p90_us: latency.p90_us,
            p99_us: latency.p99_us,
            p999_us: latency.p999_us,
            max_us: latency.max_us,
            consistency: consistency_summary(conditions),
            conditions: conditions.iter().map(ConditionResult::from).collect(),
            by_type: txn_names
                .iter()
                .zip(&stats.by_type)
                .map(|(name, t)| TypeResult::of(name, t, elapsed))
                .collect(),
            log: None,
            checkpoints: None,
            pool: None,
            locks: None,
            last_deadlock: None,
            new_order_tpm,
            execution: None,
            handoffs: None,
            others_cpu_share: None,
            interrupted: false,
        }
    }

    /// The same result with the share of the CPU time others took while it ran.
    pub fn with_others_cpu(mut self, share: Option<f64>) -> BenchResult {
        self.others_cpu_share = share;
        self
    }

    /// The same result, marked as ended early if `interrupted`.
    pub fn with_interrupted(mut self, interrupted: bool) -> BenchResult {
        self.interrupted = interrupted;
        self
    }

    /// The same result with the lock manager's waits over the run, and the last deadlock
    /// broken where the run broke any.
    pub fn with_locks(
        mut self,
        locks: Option<LockSummary>,
        last_deadlock: Option<String>,
    ) -> BenchResult {
        self.last_deadlock = last_deadlock.filter(|_| locks.is_some_and(|l| l.deadlocks > 0));
        self.locks = locks;
        self
    }

    /// The same result with its page-latch handoffs.
    pub fn with_handoffs(mut self, handoffs: Option<HandoffSummary>) -> BenchResult {
        self.handoffs = handoffs;
        self
    }

    /// The same result with the execution strategy's accounting.
    pub fn with_execution(mut self, execution: Option<ExecutionSummary>) -> BenchResult {
        self.execution = execution;
        self
    }

    /// The same result with the log's work over the run.
    pub fn with_log(mut self, log: Option<LogSummary>) -> BenchResult {
        self.log = log;
        self
    }

    pub fn with_checkpoints(mut self, checkpoints: Option<CheckpointSummary>) -> BenchResult {
        self.checkpoints = checkpoints;
        self
    }

    /// The same result with the pool's traffic with its store over the run.
    pub fn with_pool(mut self, pool: Option<PoolSummary>) -> BenchResult {
        self.pool = pool;
        self
    }

    /// The same result with its rounds listed (the statistics given to [`BenchResult::new`]
    /// are then those of all rounds together).
    pub fn with_rounds(mut self, rounds: Vec<RoundResult>) -> BenchResult {
        self.tps_median = median(&rounds.iter().map(|r| r.tps).collect::<Vec<_>>());
        self.rounds = rounds;
        self
    }

    pub fn to_json(&self) -> String {
        // Every field is a plain number, string, bool or list of them: serialisation of
        // this type cannot fail.
        serde_json::to_string_pretty(self).expect("BenchResult serialises")
    }

    /// The table printed after a run: one row per type and a total row, then the
    /// consistency result and the configuration.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let c = &self.config;
        let name_width = self
            .by_type
            .iter()
            .map(|t| t.name.len())
            .chain([5])
            .max()
            .unwrap_or(5);
        let _ = writeln!(
            out,
            "{:<name_width$} {:>9} {:>10} {:>8} {:>8} {:>8} {:>8} {:>9} {:>7} {:>9}",
            "type",
            "count",
            "txn/s",
            "p50 µs",
            "p90 µs",
            "p99 µs",
            "p99.9 µs",
            "max µs",
            "aborts",
            "rollbacks"
        );
        let rule = "─".repeat(name_width + 87);
        let _ = writeln!(out, "{rule}");
        let row = |out: &mut String, name: &str, t: &TypeResult| {
            let _ = writeln!(
                out,
                "{:<name_width$} {:>9} {:>10.1} {:>8} {:>8} {:>8} {:>8} {:>9} {:>7} {:>9}",
                name,
                t.count,
                t.tps,
                t.p50_us,
                t.p90_us,
                t.p99_us,
                t.p999_us,
                t.max_us,
                t.aborts,
                t.rollbacks
            );
        };
        for t in &self.by_type {
            row(&mut out, &t.name, t);
        }
        let _ = writeln!(out, "{rule}");
        let total = TypeResult {
            name: "total".to_string(),
            count: self.txn_count,
            commits: self.commits,
            rollbacks: self.rollbacks,
            aborts: self.aborts,
            tps: self.tps,
            p50_us: self.p50_us,
            p90_us: self.p90_us,
            p99_us: self.p99_us,
            p999_us: self.p999_us,
            max_us: self.max_us,
        };
        row(&mut out, "total", &total);
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "{} transactions in {:.2} s: {:.1} txn/s ({} committed, {} rolled back, {} retried abort{})",
            self.txn_count,
            self.duration_s,
            self.tps,
            self.commits,
            self.rollbacks,
            self.aborts,
            plural(self.aborts as usize)
        );
        if self.interrupted {
            let _ = writeln!(
                out,
                "interrupted: the figures cover the {:.2} s measured before Ctrl-C (or SIGTERM) \
                 ended the run",
                self.duration_s
            );
        }
        if let Some(log) = self.log.filter(|l| l.forces > 0) {
            // Without `--durable` no commit asks for a force: the syncs are those that put the
            // log ahead of a page written back, and checkpoints'. Counted as groups, they
            // would read as group commit at work.
            let _ = if let (Some(per_commit), Some(per_batch)) =
                (log.forces_per_commit, log.commits_per_batch)
            {
                writeln!(
                    out,
                    "log: {} forces for {} commits (warm-up included): {per_commit:.3} forces per commit, {per_batch:.1} commits per group",
                    log.forces, log.commits
                )
            } else {
                writeln!(
                    out,
                    "log: not forced at commit; {} syncs for {} commits (warm-up included), ahead of pages written back and at checkpoints",
                    log.forces, log.commits
                )
            };
        }
        if let Some(c) = self.checkpoints.filter(|c| c.background + c.in_commits > 0) {
            let taken = if c.background + c.in_commits == 1 {
                format!("{:.1} ms", c.total_us as f64 / 1e3)
            } else {
                format!(
                    "{:.1} ms in all, the longest {:.1} ms",
                    c.total_us as f64 / 1e3,
                    c.longest_us as f64 / 1e3
                )
            };
            let _ = writeln!(
                out,
                "checkpoints: {} by the checkpointer thread, {} in commits, {taken}; {} commits \
                 waited for a checkpointer behind the log (warm-up included)",
                c.background, c.in_commits, c.waits
            );
        }
        if let Some(line) = self.pool.and_then(|p| p.render("(warm-up included)")) {
            let _ = writeln!(out, "{line}");
        }
        if let Some(line) = self
            .pool
            .and_then(|p| p.render_images(self.log.map_or(0, |l| l.bytes), "(warm-up included)"))
        {
            let _ = writeln!(out, "{line}");
        }
        if let Some(line) = self.pool.and_then(|p| p.render_doublewrite()) {
            let _ = writeln!(out, "{line}");
        }
        if let Some(line) = self.pool.and_then(|p| p.render_reuse()) {
            let _ = writeln!(out, "{line}");
        }
        if let Some(l) = self.locks.filter(|l| l.waits > 0) {
            let _ = writeln!(
                out,
                "locks: {} waits in {} requests (warm-up included), {:.1} µs each; {} ended spinning, {} sleeping; wake-up µs mean {:.1}, p50 ≤{:.1}, p99 ≤{:.1}, max {:.1}; {} deadlock{}, {} timeout{}",
                l.waits, l.requests, l.wait_us_mean, l.waits_ended_spinning, l.waits_ended_sleeping,
                l.wake_us_mean, l.wake_us_p50, l.wake_us_p99, l.wake_us_max,
                l.deadlocks, plural(l.deadlocks as usize), l.timeouts, plural(l.timeouts as usize)
            );
        }
        if let Some(cycle) = &self.last_deadlock {
            let _ = writeln!(out, "last deadlock: {cycle}");
        }
        if let Some(line) = c.cpu_idle.note(c.durable || c.threads > 1) {
            let _ = writeln!(out, "{line}");
        }
        if let Some(line) = self
            .others_cpu_share
            .and_then(|share| crate::machine_cpu::note(share, c.durable))
        {
            let _ = writeln!(out, "{line}");
        }
        if let Some(h) = &self.handoffs {
            let _ = writeln!(out, "{}", h.render());
        }
        if let Some(tpm) = self.new_order_tpm {
            let _ = writeln!(
                out,
                "New-Order: {tpm:.0} committed a minute (tpmC; aborts and rollbacks excluded)"
            );
        }
        if let Some(execution) = &self.execution {
            out.push_str(&execution.render());
        }
        if self.rounds.len() > 1 {
            let each: Vec<String> = self
                .rounds
                .iter()
                .map(|r| format!("{:.0}", r.tps))
                .collect();
            let spread = |tps: f64| 100.0 * (tps / self.tps_median - 1.0);
            let (low, high) = self
                .rounds
                .iter()
                .fold((f64::INFINITY, 0.0f64), |(l, h), r| {
                    (l.min(r.tps), h.max(r.tps))
                });
            let _ = writeln!(
                out,
                "{} rounds: {} txn/s; median {:.0} (lowest {:+.0}%, highest {:+.0}%)",
                self.rounds.len(),
                each.join(" / "),
                self.tps_median,
                spread(low),
                spread(high)
            );
        }
        let held = self.conditions.iter().filter(|c| c.holds).count();
        if self.consistency == CHECKED_BY_SERVER {
            let _ = writeln!(out, "consistency: checked by the server when it stops");
        } else if self.consistency == NOT_ATOMIC {
            let _ = writeln!(
                out,
                "consistency: checked by the server when it stops; autocommit mode commits each \
                 operation alone, so a transaction that rolls back or fails midway, or meets a \
                 concurrent one, leaves the rest of its work undone: the server's check may \
                 find conditions broken by this run, not by the engine"
            );
        } else if self.consistency == "ok" {
            let _ = writeln!(
                out,
                "consistency: ok ({held} of {} conditions hold)",
                self.conditions.len()
            );
        } else {
            let _ = writeln!(
                out,
                "consistency: FAILED ({held} of {} conditions hold)",
                self.conditions.len()
            );
            for cond in self.conditions.iter().filter(|c| !c.holds) {
                let _ = writeln!(
                    out,
                    "  ✗ {}: {}",
                    cond.name,
                    cond.detail.as_deref().unwrap_or("")
                );
            }
        }
        let _ = writeln!(out, "config: {}", configuration_line(c));
        out
    }
}

/// The configuration in one line, `key=value` pairs.
pub fn configuration_line(c: &RunConfiguration) -> String {
    let mut line = format!("workload={} scale={}", c.workload, c.scale);
    if c.workload == "tpcc" {
        let _ = write!(line, " mix={}", c.mix);
    }
    if let (Some(w), Some(d)) = (&c.ycsb_workload, &c.distribution) {
        let _ = write!(line, " ycsb-workload={w} distribution={d}");
    }
    let switches = if c.switches.is_empty() {
        "none".to_string()
    } else {
        c.switches.join(",")
    };
    let _ = write!(
        line,
        " threads={} preset={} switches-off={} durable={}{}{}{} pool-mib={} db={}{} warmup={}s seed={} glass={} at={}",
        c.threads,
        c.preset,
        switches,
        c.durable,
        if c.prefetch { "" } else { " prefetch=off" },
        match (c.log_runs, c.log_run_bytes) {
            (false, _) => " log-runs=off".to_string(),
            (true, wal::RUN_BYTES) => String::new(),
            (true, bytes) => format!(" log-run-bytes={bytes}"),
        },
        if c.huge_pages { " huge-pages=on" } else { "" },
        c.pool_mib,
        c.db.as_deref().unwrap_or("memory"),
        match (&c.log_sync, c.log_prealloc_mib) {
            (Some(sync), Some(mib)) => format!(" log-sync={sync} log-prealloc-mib={mib}"),
            _ => String::new(),
        } + &c
            .log_segment_mib
            .map(|mib| format!(" log-segment-mib={mib}"))
            .unwrap_or_default() + if c.commit_gather { " commit-gather" } else { "" }
            + &if c.page_cleaners > 0 {
                format!(" page-cleaners={}", c.page_cleaners)
            } else {
                String::new()
            }
            + if c.full_page_images {
                " full-page-images"
            } else {
                ""
            }
            + if c.doublewrite { " doublewrite" } else { "" }
            + if c.durable && !c.early_lock_release {
                " early-lock-release=off"
            } else {
                ""
            },
        c.warmup_s,
        c.seed,
        c.glass_version,
        c.timestamp
    );
    line
}

/// `time` as RFC 3339 in UTC, to the second (e.g. `2025-01-31T12:00:00Z`).
pub fn rfc3339_utc(time: SystemTime) -> String {
    let secs = time
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// "s" after a count other than one: `format!("{n} point{}", plural(n))`.
pub(crate) fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Outcome;

    fn configuration() -> RunConfiguration {
        RunConfiguration {
            glass_version: "0.1.0".into(),
            timestamp: rfc3339_utc(SystemTime::now()),
            workload: "tpcb".into(),
            mix: "full".into(),
            scale: 2,
            ycsb_workload: None,
            distribution: None,
            preset: "custom".into(),
            switches: vec!["locking".into()],
            threads: 1,
            seed: 7,
            durable: false,
            prefetch: true,
            log_runs: true,
            log_run_bytes: wal::RUN_BYTES,
            huge_pages: false,
            pool_mib: 64,
            db: None,
            log_sync: None,
            log_prealloc_mib: None,
            log_segment_mib: None,
            commit_gather: false,
            page_cleaners: 0,
            full_page_images: false,
            doublewrite: false,
            early_lock_release: false,
            warmup_s: 0.0,
            load_s: Some(0.5),
            cpu_idle: CpuIdle::default(),
        }
    }

    fn result(conditions: &[Condition]) -> BenchResult {
        let mut stats = RunStats::new(2);
        for i in 0..100 {
            stats.by_type[0].record(Outcome::Committed, Duration::from_micros(50 + i));
        }
        stats.by_type[1].record(Outcome::RolledBack, Duration::from_micros(900));
        stats.by_type[1].aborts = 3;
        BenchResult::new(
            configuration(),
            &["AccountUpdate", "Other"],
            &stats,
            Duration::from_secs(2),
            conditions,
        )
    }

    #[test]
    fn rounds_report_their_median_and_spread() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
        let single = result(&[]);
        assert!(!single.render().contains("rounds:"));
        let round = |tps: f64| RoundResult {
            txn_count: tps as u64,
            duration_s: 1.0,
            tps,
            p50_us: 1,
            p99_us: 2,
        };
        let r = result(&[]).with_rounds(vec![round(100.0), round(50.0), round(200.0)]);
        assert_eq!(r.tps_median, 100.0);
        let text = r.render();
        assert!(
            text.contains(
                "3 rounds: 100 / 50 / 200 txn/s; median 100 (lowest -50%, highest +100%)"
            ),
            "{text}"
        );
    }

    #[test]
    fn json_carries_every_required_field() {
        let r = result(&[]);
        let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        for key in [
            "workload",
            "mix",
            "preset",
            "switches",
            "scale",
            "threads",
            "duration_s",
            "txn_count",
            "tps",
            "p50_us",
            "p90_us",
            "p99_us",
            "p999_us",
            "max_us",
            "aborts",
            "rollbacks",
            "commits",
            "consistency",
            "by_type",
            "seed",
            "durable",
            "prefetch",
            "log_runs",
            "log_run_bytes",
            "huge_pages",
            "pool_mib",
            "glass_version",
            "timestamp",
            "warmup_s",
            "load_s",
            "db",
            "conditions",
            "rounds",
            "tps_median",
        ] {
            assert!(json.get(key).is_some(), "missing {key} in {json}");
        }
        assert_eq!(json["txn_count"], 101);
        assert_eq!(json["rollbacks"], 1);
        assert_eq!(json["aborts"], 3);
        assert_eq!(json["tps"], 50.5);
        assert_eq!(json["switches"], serde_json::json!(["locking"]));
        assert_eq!(json["consistency"], "ok");
        assert!(json.get("ycsb_workload").is_none());
        // One round unless `--rounds` says more: the run itself.
        assert_eq!(json["rounds"].as_array().map(Vec::len), Some(1));
        assert_eq!(json["rounds"][0]["txn_count"], 101);
        assert_eq!(json["tps_median"], 50.5);
        let t = &json["by_type"]["AccountUpdate"];
        for key in [
            "count",
            "tps",
            "p50_us",
            "p99_us",
            "aborts",
            "rollbacks",
            "max_us",
        ] {
            assert!(t.get(key).is_some(), "missing by_type.{key} in {t}");
        }
        assert_eq!(t["count"], 100);
        assert_eq!(json["by_type"]["Other"]["aborts"], 3);
    }

    #[test]
    fn failed_conditions_are_named_in_json_and_table() {
        let conditions = vec![
            Condition {
                name: "TPC-B sums".into(),
                description: "balances add up".into(),
                violation: None,
            },
            Condition {
                name: "TPC-B history".into(),
                description: "one history row per txn".into(),
                violation: Some("3 rows missing".into()),
            },
        ];
        let r = result(&conditions);
        assert_eq!(r.consistency, "failed: TPC-B history (3 rows missing)");
        let table = r.render();
        assert!(
            table.contains("consistency: FAILED (1 of 2 conditions hold)"),
            "{table}"
        );
        assert!(table.contains("✗ TPC-B history: 3 rows missing"), "{table}");
    }

    /// A run whose threads sleep and wake says so where idle vCPUs halt at once; a
    /// one-thread run in memory, whose thread never sleeps, does not, nor does any run where
    /// they poll first. The JSON records the policy either way.
    #[test]
    fn a_run_that_pays_for_halted_vcpus_says_so() {
        let halting = CpuIdle {
            driver: Some("haltpoll".into()),
            governor: Some("haltpoll".into()),
            halt_poll_ns: Some(0),
        };
        let with = |threads: usize, durable: bool, idle: &CpuIdle| {
            let mut r = result(&[]);
            r.config.threads = threads;
            r.config.durable = durable;
            r.config.cpu_idle = idle.clone();
            r
        };
        let says = |r: &BenchResult| r.render().contains("machine: idle vCPUs halt at once");
        assert!(says(&with(8, false, &halting)));
        assert!(says(&with(1, true, &halting)));
        assert!(!says(&with(1, false, &halting)));
        let polling = CpuIdle {
            halt_poll_ns: Some(200_000),
            ..halting.clone()
        };
        assert!(!says(&with(8, true, &polling)));
        let json = with(1, false, &halting).to_json();
        assert!(json.contains("\"halt_poll_ns\": 0"), "{json}");
    }

    #[test]
    fn a_run_with_deadlocks_tells_the_last_cycle() {
        let cycle = "T7 (the victim) waits for S on a record of stock (0x81) → T9 waits for X \
                     on a record of stock (0x82) → T7";
        let with = |deadlocks: u64| {
            let locks = LockSummary {
                waits: 10,
                deadlocks,
                ..LockSummary::default()
            };
            result(&[]).with_locks(Some(locks), Some(cycle.to_string()))
        };
        let told = with(2);
        assert!(
            told.render().contains(&format!("last deadlock: {cycle}")),
            "{}",
            told.render()
        );
        assert!(told.render().contains("; 2 deadlocks, 0 timeouts"));
        assert!(with(1).render().contains("; 1 deadlock, 0 timeouts"));
        let json: serde_json::Value = serde_json::from_str(&told.to_json()).unwrap();
        assert_eq!(json["last_deadlock"], cycle);
        // One from before the run (a load's, another run's) is not this run's to tell.
        let none = with(0);
        assert!(!none.render().contains("last deadlock"));
        assert!(!none.to_json().contains("last_deadlock"));
    }

    #[test]
    fn a_run_that_shared_a_busy_machine_says_so() {
        let busy = result(&[]).with_others_cpu(Some(0.42));
        assert!(
            busy.render()
                .contains("took 42% of the CPU time while this ran"),
            "{}",
            busy.render()
        );
        let json: serde_json::Value = serde_json::from_str(&busy.to_json()).unwrap();
        assert_eq!(json["others_cpu_share"], 0.42);
        let quiet = result(&[]).with_others_cpu(Some(0.03));
        assert!(!quiet.render().contains("machine: other processes"));
        assert!(!result(&[]).to_json().contains("others_cpu_share"));
    }

    #[test]
    fn a_log_not_forced_at_commit_reports_its_syncs_not_groups() {
        let log = |durable: bool| {
            let mut r = result(&[]);
            r.config.durable = durable;
            r.log = Some(LogSummary::between(
                &wal::LogStats::default(),
                &wal::LogStats {
                    commits: 1_000,
                    syncs: 10,
                    commit_batches: 10,
                    ..wal::LogStats::default()
                },
                durable,
            ));
            let json = serde_json::to_value(&r).unwrap();
            assert_eq!(json["log"]["forces"], 10);
            if durable {
                assert_eq!(json["log"]["forces_per_commit"], 0.01);
                assert_eq!(json["log"]["commits_per_batch"], 100.0);
            } else {
                assert!(json["log"]["forces_per_commit"].is_null(), "{json}");
                assert!(json["log"]["commits_per_batch"].is_null(), "{json}");
            }
            let text = r.render();
            text.lines()
                .find(|l| l.starts_with("log: "))
                .unwrap()
                .to_string()
        };
        let durable = log(true);
        assert!(durable.contains("10 forces for 1000 commits"), "{durable}");
        assert!(durable.contains("100.0 commits per group"), "{durable}");
        let not = log(false);
        assert!(
            not.contains("not forced at commit; 10 syncs for 1000 commits"),
            "{not}"
        );
        assert!(!not.contains("group"), "{not}");
    }

    #[test]
    fn the_checkpoints_line_says_what_they_took_and_is_absent_without_any() {
        let line = |c: CheckpointSummary| {
            let mut r = result(&[]);
            r.checkpoints = Some(c);
            let json = serde_json::to_value(&r).unwrap();
            assert_eq!(json["checkpoints"]["longest_us"], c.longest_us);
            r.render()
                .lines()
                .find(|l| l.starts_with("checkpoints: "))
                .map(str::to_string)
        };
        let two = line(CheckpointSummary {
            in_commits: 2,
            total_us: 781_400,
            longest_us: 390_900,
            ..CheckpointSummary::default()
        })
        .unwrap();
        assert!(
            two.starts_with(
                "checkpoints: 0 by the checkpointer thread, 2 in commits, 781.4 ms in all, the \
                 longest 390.9 ms; 0 commits waited"
            ),
            "{two}"
        );
        let one = line(CheckpointSummary {
            background: 1,
            total_us: 12_000,
            longest_us: 12_000,
            ..CheckpointSummary::default()
        })
        .unwrap();
        assert!(one.contains("0 in commits, 12.0 ms; "), "{one}");
        assert!(!one.contains("longest"), "{one}");
        assert_eq!(line(CheckpointSummary::default()), None);
    }

    #[test]
    fn table_lists_types_in_order_then_total_and_config() {
        let table = result(&[]).render();
        let a = table.find("AccountUpdate").unwrap();
        let o = table.find("Other").unwrap();
        let t = table.find("total").unwrap();
        assert!(a < o && o < t, "{table}");
        assert!(table.contains("consistency: ok (0 of 0 conditions hold)"));
        assert!(table.contains(" rolled back, 3 retried aborts)"), "{table}");
        let mut one = result(&[]);
        one.aborts = 1;
        assert!(one.render().contains(" rolled back, 1 retried abort)"));
        assert!(
            table.contains(
                "config: workload=tpcb scale=2 threads=1 preset=custom switches-off=locking"
            ),
            "{table}"
        );
    }

    #[test]
    fn rfc3339_dates_are_right() {
        assert_eq!(rfc3339_utc(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400 + 3_661); // 2000-02-29
        assert_eq!(rfc3339_utc(t), "2000-02-29T01:01:01Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_735_689_599); // last second of 2024
        assert_eq!(rfc3339_utc(t), "2024-12-31T23:59:59Z");
    }

    #[test]
    fn the_pool_line_says_an_in_memory_run_outgrew_its_pool() {
        let quiet = PoolSummary {
            pool_mib: 404,
            in_memory: true,
            reads: 0,
            writes: 0,
            evict_writes: 0,
            cleaner_writes: 0,
            image_bytes: 0,
            doublewrite_batches: 0,
            doublewrite_pages: 0,
            doublewrite_page_file_syncs: 0,
            doublewrite_writer_batches: 0,
            doublewrite_ring_bytes: 0,
            leaves_retired: 0,
            leaves_adopted: 0,
            pages_reused: 0,
        };
        assert_eq!(quiet.render("(warm-up included)"), None);
        assert_eq!(quiet.render_reuse(), None);
        assert_eq!(quiet.render_images(1 << 20, "(warm-up included)"), None);
        assert_eq!(quiet.render_doublewrite(), None);
        let doubled = PoolSummary {
            doublewrite_batches: 3,
            doublewrite_pages: 150,
            doublewrite_page_file_syncs: 1,
            doublewrite_writer_batches: 2,
            doublewrite_ring_bytes: 58 << 20,
            ..quiet
        };
        assert_eq!(
            doubled.render_doublewrite().unwrap(),
            "doublewrite: 150 page writes went through the doublewrite file first, in 3 \
             batches of a sync each (2 written by its writer thread as they filled) to a ring \
             of 58 MiB, and the page file was synced 1 time, since the open (--doublewrite)"
        );
        let imaged = PoolSummary {
            image_bytes: 3 << 20,
            ..quiet
        };
        assert_eq!(
            imaged.render_images(4 << 20, "(warm-up included)").unwrap(),
            "full-page images: 3.0 MiB logged (warm-up included), 75% of the 4.0 MiB of log \
             (--full-page-images)"
        );
        let reused = PoolSummary {
            leaves_retired: 30,
            pages_reused: 28,
            ..quiet
        };
        let line = reused.render_reuse().unwrap();
        assert!(
            line.starts_with("pages: 28 of the 30 B+-tree pages unlinked since"),
            "{line}"
        );
        assert!(line.contains("the rest wait"), "{line}");
        let all = PoolSummary {
            pages_reused: 30,
            ..reused
        };
        let line = all.render_reuse().unwrap();
        assert!(line.ends_with("were allocated again"), "{line}");
        // Leaves an earlier run unlinked count too, and are said to be.
        let adopted = PoolSummary {
            leaves_adopted: 5,
            pages_reused: 33,
            ..reused
        };
        let line = adopted.render_reuse().unwrap();
        assert!(
            line.starts_with(
                "pages: 33 of the 35 B+-tree pages unlinked (5 of them by earlier runs, found \
                 when the database opened)"
            ),
            "{line}"
        );
        assert!(line.contains("the rest wait"), "{line}");
        let outgrown = PoolSummary {
            reads: 12,
            writes: 30,
            ..quiet
        };
        let line = outgrown.render("(warm-up included)").unwrap();
        assert!(
            line.starts_with("pool: 12 pages read back and 30 written out (warm-up included)"),
            "{line}"
        );
        assert!(line.contains("outgrew the 404 MiB pool"), "{line}");
        let on_disk = PoolSummary {
            in_memory: false,
            ..outgrown
        };
        let line = on_disk.render("while serving").unwrap();
        assert!(!line.contains("outgrew"), "{line}");
        assert!(
            line.contains("12 page reads and 30 page writes while serving"),
            "{line}"
        );
        let cleaned = PoolSummary {
            evict_writes: 4,
            cleaner_writes: 20,
            ..on_disk
        };
        let line = cleaned.render("while serving").unwrap();
        assert!(
            line.contains(
                "30 page writes (4 by misses freeing a dirty victim, 20 by page cleaners) \
                 while serving"
            ),
            "{line}"
        );
    }
}
