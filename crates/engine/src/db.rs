//! The database: opening (and recovering), the catalog, and beginning transactions.
//!
//! ```text
//!   Database
//!    ├── catalog: table and index slots (fixed arrays, filled once) + name maps (latched)
//!    ├── pool: BufferPool over the page file          (None with page-access=off)
//!    ├── log:  LogManager (records, or LSNs only)      (None with main-log=off and lsn=off)
//!    ├── locks: LockManager                            (None with locking=off)
//!    └── active: the active-transaction table          (only with xactions on)
//! ```
//!
//! On disk a database is a directory: `pages.db` (the page file), `wal.log` (the log and its
//! master record) and `catalog.json` (table and index definitions with their root pages, written
//! first when the database is created and synchronously at every schema change: schema changes
//! are not transactional), and `LOCK`, locked exclusively (`flock`) while the database is open,
//! so a second process is refused. A directory that lost one of its files is refused, naming
//! it, rather than opened with an empty one in its place; so is a log damaged in its middle,
//! unless [`DbConfig::accept_log_loss`] accepts cutting it there.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use storage::buffer::{BufferPool, FrameMemory, PoolConfig};
use storage::file::{FilePageStore, MemPageStore, PageStore};
use storage::heap::{HeapFile, SavedFreeSpace, SavedHeap, FREE_SPACE_FILE};
use storage::memstore::MemStore;
use storage::{Lsn, PageId, PageLog, PageSize};
use txn::lock::{LockConfig, LockManager, LockName};
use wal::storage::FileLogOptions;
pub use wal::storage::LogSync;
use wal::{LogConfig, LogManager, LogMode, TxnId};

use crate::api::{IndexRef, TableRef, TxError, TxResult};
use crate::catalog::{parse_catalog, Catalog, CatalogIndex, CatalogTable};
use crate::keys::KeySpec;
use crate::record::Layout;
use crate::schema::{IndexKind, IndexSchema, TableSchema};
use crate::switches::{Switch, Switches};
use crate::table::{Index, IndexStore, Records, Table};
use crate::txn::Transaction;
use crate::undo::{UndoOp, KIND_DELETE, KIND_INSERT, KIND_UPDATE, KIND_UPDATE_PIECES};

/// Most tables (and, separately, secondary indexes) a database holds.
pub const MAX_TABLES: usize = 256;

/// Lock-space id of a secondary index's entries (table ids stay below `MAX_TABLES`).
/// Changed spans of a record closer than this many bytes are logged as one: a separate piece
/// costs a 4-byte header in the undo image and in the redo range list.
pub(crate) const SPAN_MERGE_GAP: usize = 8;

/// At most this many pieces per update; more are logged as one span covering them all.
pub(crate) const MAX_SPANS: usize = 8;

/// Bit `c` set for each column `c < 64` in `columns` (see `Table::indexed_columns`).
fn column_mask(columns: &[usize]) -> u64 {
    columns
        .iter()
        .filter(|c| **c < 64)
        .fold(0, |mask, c| mask | 1 << c)
}

pub fn index_lock_space(index: u32) -> u32 {
    MAX_TABLES as u32 + index
}

/// How to open a database.
#[derive(Clone, Debug)]
pub struct DbConfig {
    /// Directory holding the page file and the log; `None` keeps everything in memory.
    pub path: Option<PathBuf>,
    /// Buffer pool size in MiB.
    pub pool_mib: usize,
    /// Force the log at commit (a commit returns once its record is durable). Only with the
    /// `disk-log` switch on; with it off the log is never forced.
    pub durable: bool,
    pub switches: Switches,
    /// Worker threads that will use the database (validated against the switches).
    pub threads: usize,
    /// Records per table a transaction may lock before escalating to a table lock.
    pub escalation_threshold: usize,
    /// Measure time in the lock manager (Lock / physical / logical contention).
    pub lock_timing: bool,
    /// Take a fuzzy checkpoint whenever the log has grown by this many bytes since the last
    /// one (databases on disk, or in memory with a durable log; logging and `xactions` on),
    /// bounding recovery time and the log: it is discarded behind each checkpoint, so about
    /// two of these intervals stay (more while a transaction runs across them). Full-page
    /// images are not counted, up to [`IMAGE_ALLOWANCE`] intervals of log in all.
    pub checkpoint_bytes: u64,
    /// Take those fuzzy checkpoints on a thread of their own ([`crate::checkpointer`])
    /// instead of in the commit that crosses the threshold, so that no commit waits for a
    /// checkpoint's page writes. An error a background checkpoint meets is returned by the
    /// commit that makes the next one due. Off by default (`glass --background-checkpoints`
    /// turns it on): on a machine with no core to spare the thread costs the workers' tail
    /// latency (docs/performance.md, "Checkpoints off the commit path").
    pub background_checkpoints: bool,
    /// Page cleaners to run ([`crate::cleaner`]): threads that write back the dirty pages
    /// the pool's clock is about to take, so that a miss finds its victim clean (databases on
    /// disk only; several put several writes on the device at once). None by default (`glass
    /// --page-cleaners N`): see docs/performance.md, "Page cleaners".
    pub page_cleaners: usize,
    /// When a page's first change since it was last written back is logged as its whole
    /// image (`storage::BufferPool::set_full_page_images`; databases on disk with a log
    /// only), so that recovery rebuilds a page write a crash tore in any pieces, a power
    /// loss's included. By default for databases without a doublewrite file only
    /// ([`FullPageImages`]).
    pub full_page_images: FullPageImages,
    /// When pages are written back through a doublewrite file (`storage::doublewrite`): a
    /// page write a crash tears is put back from its copy there at the next open, whatever
    /// the disk kept, so full-page images are not needed (`FullPageImages::WithoutDoublewrite`
    /// logs none). On by default ([`Doublewrite`]). A database opened without it still has a
    /// doublewrite file left by a crash put back first.
    pub doublewrite: Doublewrite,
    /// The doublewrite file's ring, in bytes of pages (rounded down to whole slots of
    /// `storage::doublewrite::DEFAULT_BATCH_PAGES` pages, at least one, at most
    /// `storage::doublewrite::MAX_SLOTS`); `None` sizes it by the page file at the open
    /// (`storage::doublewrite::slots_for`: a quarter of it, 16–64 MiB at 8 KiB pages).
    pub doublewrite_ring_bytes: Option<u64>,
    /// Lock heap pages instead of records (Berkeley DB style, for two-stage execution).
    /// Key-range (next-key) locks stay on keys; needs `page-access` on.
    pub page_locking: bool,
    /// Every thread inserts into one insertion page per table (the free-space map's last
    /// insert) instead of a page of its own (`storage::heap::HeapFile::sharing_insertion_pages`):
    /// with page locking, inserters queue on that page as on Berkeley DB's right-hand leaves.
    /// For the Charm experiments; off by default.
    pub shared_insert_pages: bool,
    /// Honour [`crate::Tx::read_committed`]: a transaction that asks for isolation level 1
    /// (TPC-C's Stock-Level) lets each read's shared record or page locks go as the read
    /// ends. On by default. Off, every read keeps its locks to commit whatever it asks for
    /// (degree 3 only, as Berkeley DB 2.4 had: the Charm experiments run so).
    pub read_committed: bool,
    /// Act on [`crate::Tx::prefetch`] hints (main-memory records and indexes only, that is
    /// with `page-access` off). Off, the hints are ignored: for measuring what they buy.
    pub prefetch: bool,
    /// Open a log damaged in its middle (a bad record with intact ones after it) by cutting it
    /// at the damage, losing every record after it, instead of refusing to open. The loss is
    /// reported on stderr and by [`Database::log_loss`].
    pub accept_log_loss: bool,
    /// Create what is missing: the directory, its files, tables and indexes not yet in the
    /// catalog. Off, the database must exist (a directory holding `catalog.json`, and
    /// `pages.db` and `wal.log` where the switches use them; each missing one is an error
    /// naming it) and [`Database::create_table`] / [`Database::create_index`] only find
    /// what the catalog holds: for `glass check` and runs on a loaded database, which must
    /// never build a new database over the remains of a damaged one.
    pub create: bool,
    /// How the log file's writes become durable (`fdatasync` after writes, `fsync`, `O_DSYNC`
    /// writes, or `O_DIRECT | O_DSYNC` writes of whole blocks); see `wal::storage`.
    pub log_sync: LogSync,
    /// Zeros kept written ahead of the log file's end, added this many bytes at a time, so
    /// that a force writes no new file size; 0 lets the file grow with each write.
    pub log_prealloc_bytes: u64,
    /// The most bytes of log one file holds (`wal.log`, then `wal.log.<offset>` files beside
    /// it); whole segments behind a checkpoint are unlinked. A positive multiple of 4 KiB.
    pub log_segment_bytes: u64,
    /// Whether a group-commit leader waits for the committers it expects before it forces
    /// (`wal::LogConfig::gather_commits`). On by default: durable TPC-B at 8 threads on 2
    /// cores +8–16%, durable TPC-C unchanged (docs/performance.md, "Gathering by default").
    pub gather_commits: bool,
    /// Early lock release: with a forced log (`durable`) and locking on, a committing
    /// transaction releases its locks once its commit record is in the log buffer, before
    /// the force, and waits for the force holding nothing (Johnson et al.'s Aether). A
    /// transaction that wrote nothing then waits, before it returns, until the log is
    /// durable past every commit whose locks were released early: it may have read what one
    /// of them wrote. What it buys: the transactions queued behind a committer's locks run
    /// while the committer waits for the disk, and a gathering leader
    /// ([`DbConfig::gather_commits`]) holds no lock others wait for. On by default (durable
    /// TPC-C at 8 threads on 2 cores +43%: docs/performance.md, "Early lock release").
    pub early_lock_release: bool,
    /// Whether threads reserve the log buffer's bytes for their page-redo records a run at a
    /// time (`wal::LogConfig::runs`; on by default, used by logs that are not forced): off,
    /// every record reserves its bytes on the log's tail, to measure what runs buy.
    pub log_runs: bool,
    /// The bytes a run reserves at once (`wal::LogConfig::run_bytes`).
    pub log_run_bytes: usize,
    /// Ask the kernel to back the buffer pool's page images with transparent huge pages
    /// ([`storage::FrameMemory::Huge`]). Off by default: measured, TPC-C ran no faster with
    /// them and loaded slower (docs/performance.md).
    pub huge_pages: bool,
    /// How long a transaction waits for a lock before it fails with a retryable error (when
    /// no deadlock is found sooner).
    pub lock_wait_timeout: std::time::Duration,
    /// Latency added to the page file's reads and writes (an emulated device; none by
    /// default), from the end of [`Database::open`] on (recovery runs at the machine's
    /// speed) while [`Database::set_device`] leaves it on.
    pub device: storage::DeviceModel,
    /// Latency added to each write and sync of the log file, on a device of its own (one
    /// request at a time): the log disk of the paper's machine. Zero by default.
    pub log_device: std::time::Duration,
    /// Sample which part of each lock wait passes while a transaction on the blocking chain
    /// is inside a physical read (the Charm paper's Table 1; see `txn::lock::IoProbe`).
    /// Only transactions run by an [`crate::execution::Executor`] name their reads.
    pub attribute_lock_waits: bool,
    /// Tables whose pages (heap and indexes) are allocated on the second emulated data
    /// device, which has [`DbConfig::device`]'s latency and a queue of its own: the Charm
    /// paper's order-line disk. Pages already allocated keep the device they were
    /// allocated on (it is in each page's header), so a table moves only if loaded so.
    pub second_device_tables: Vec<String>,
    /// Whether the pages of B+-tree leaves emptied and unlinked by deletes are allocated
    /// again once no running transaction can hold their ids (`storage::BufferPool::
    /// enable_page_reuse`; every transaction counts itself as a reader). On by default; off,
    /// each such page stays an unlinked leaf for good, and a queue-like index (TPC-C's new
    /// orders) grows the page file by about two pages per thousand full-mix transactions.
    pub reuse_pages: bool,
}

/// When a database on disk logs whole page images ([`DbConfig::full_page_images`]).
///
/// A process killed inside a page's write leaves the page's first part new, header included;
/// recovery rebuilds such a page from the log without any image (`engine::recovery`'s `Torn`).
/// A power loss may keep any of a write's sectors, and only an image rebuilds a page whose
/// header it left old. What the images cost: docs/performance.md, "Torn pages".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FullPageImages {
    /// For every database whose pages are not written through a doublewrite file
    /// ([`DbConfig::doublewrite`], on by default), which guards them in the images' stead:
    /// every database on disk promises to survive a power loss (a durable one with every
    /// acknowledged commit, one without `--durable` with a prefix of its commits).
    #[default]
    WithoutDoublewrite,
    /// For databases whose commits are forced (`durable`) without a doublewrite file only:
    /// one not durable then has no guard against a power loss's torn write.
    WhenDurable,
    On,
    Off,
}

/// When a database on disk writes its pages back through a doublewrite file
/// ([`DbConfig::doublewrite`]). Every database by default: with pages written back while
/// transactions run, it costs less than full-page images, which it replaces
/// (docs/performance.md, "The doublewrite file by default", and "A database not durable
/// survives a power cut").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Doublewrite {
    #[default]
    On,
    /// For databases whose commits are forced (`durable`) only.
    WhenDurable,
    Off,
}

impl Doublewrite {
    /// Whether pages go through the file, for a database that is `durable` or not.
    pub fn on(self, durable: bool) -> bool {
        match self {
            Doublewrite::WhenDurable => durable,
            Doublewrite::On => true,
            Doublewrite::Off => false,
        }
    }
}

impl FullPageImages {
    /// Whether images are logged, for a database that is `durable` or not, with or without a
    /// `doublewrite` file (which protects against torn pages in their stead).
    pub fn on(self, durable: bool, doublewrite: bool) -> bool {
        match self {
            FullPageImages::WithoutDoublewrite => !doublewrite,
            FullPageImages::WhenDurable => durable && !doublewrite,
            FullPageImages::On => true,
            FullPageImages::Off => false,
        }
    }
}

impl Default for DbConfig {
    fn default() -> Self {
        DbConfig {
            path: None,
            pool_mib: 256,
            durable: false,
            switches: Switches::default(),
            threads: 1,
            escalation_threshold: 5000,
            lock_timing: false,
            checkpoint_bytes: 64 << 20,
            background_checkpoints: false,
            page_cleaners: 0,
            full_page_images: FullPageImages::WithoutDoublewrite,
            doublewrite: Doublewrite::On,
            doublewrite_ring_bytes: None,
            page_locking: false,
            shared_insert_pages: false,
            read_committed: true,
            prefetch: true,
            accept_log_loss: false,
            create: true,
            log_sync: LogSync::default(),
            log_prealloc_bytes: wal::storage::DEFAULT_PREALLOC_BYTES,
            log_segment_bytes: wal::storage::DEFAULT_SEGMENT_BYTES,
            gather_commits: true,
            early_lock_release: true,
            log_runs: true,
            huge_pages: false,
            log_run_bytes: wal::RUN_BYTES,
            lock_wait_timeout: std::time::Duration::from_secs(10),
            reuse_pages: true,
            device: storage::DeviceModel::none(),
            log_device: std::time::Duration::ZERO,
            attribute_lock_waits: false,
            second_device_tables: Vec::new(),
        }
    }
}

impl DbConfig {
    /// This configuration with neither guard against torn page writes: no doublewrite file
    /// and no full-page images. For what needs none (a load, which counts only once closed
    /// and synced) and for what must not pay for one (the Charm experiments: Berkeley DB had
    /// neither). A crash still loses nothing such a database had made durable; a power loss
    /// may tear a page beyond repair.
    pub fn without_torn_page_guard(self) -> DbConfig {
        DbConfig {
            doublewrite: Doublewrite::Off,
            full_page_images: FullPageImages::Off,
            ..self
        }
    }
}

/// A running transaction as the active-transaction table sees it (`xactions` on).
pub struct ActiveTxn {
    pub id: TxnId,
    pub last_lsn: AtomicU64,
    /// A lower bound on the LSN of the transaction's first record (0 until it is about to log
    /// one): [`LogManager::end_lower_bound`] just before that record was appended, which the
    /// record's LSN cannot lie below. A checkpoint keeps the log
    /// from here on, since a rollback reads the records back to the first one. Taken *before*
    /// the append, so a checkpoint that reads 0 began before the record was appended.
    pub first_lsn: AtomicU64,
    pub committed: std::sync::atomic::AtomicBool,
    started: Instant,
    operations: AtomicU64,
}

impl ActiveTxn {
    pub(crate) fn new(id: TxnId) -> ActiveTxn {
        ActiveTxn {
            id,
            last_lsn: AtomicU64::new(0),
            first_lsn: AtomicU64::new(0),
            committed: std::sync::atomic::AtomicBool::new(false),
            started: Instant::now(),
            operations: AtomicU64::new(0),
        }
    }

    /// Called before the transaction appends its first record.
    #[cold]
    pub(crate) fn note_first_record(&self, log: &LogManager) {
        self.first_lsn
            .store(log.end_lower_bound().0, Ordering::Relaxed);
    }

    pub(crate) fn touch(&self) {
        self.operations.fetch_add(1, Ordering::Relaxed);
    }

    /// How long the transaction has been running.
    pub fn age(&self) -> std::time::Duration {
        self.started.elapsed()
    }
}

/// What a checkpoint reads of a running transaction.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RunningTxn {
    pub txn: TxnId,
    pub last_lsn: Lsn,
    /// [`ActiveTxn::first_lsn`]: `Lsn::NONE` while it has logged nothing.
    pub first_lsn: Lsn,
    pub committed: bool,
}

/// An open database.
pub struct Database {
    pub(crate) config: DbConfig,
    /// An exclusive lock on the directory's `LOCK` file while the database is open (on disk),
    /// so that a second process opening it is refused instead of both writing the same files.
    _dir_lock: Option<std::fs::File>,
    /// What the open's recovery did (`None`: nothing to recover, a database just created or
    /// without a log of records).
    recovery: Option<crate::recovery::RecoveryReport>,
    /// The doublewrite file's counters, when pages are written through one.
    doublewrite: Option<Arc<storage::doublewrite::DoublewriteCounters>>,
    pub(crate) pool: Option<Arc<BufferPool>>,
    pub(crate) log: Option<Arc<LogManager>>,
    /// Whether log records are built (main-log on); else the log only hands out LSNs.
    pub(crate) log_records: bool,
    pub(crate) locks: Option<LockManager>,
    pub(crate) xactions: bool,
    pub(crate) page_locking: bool,
    /// Whether [`crate::Tx::read_committed`] is honoured ([`DbConfig::read_committed`]).
    pub(crate) read_committed: bool,
    /// Whether [`crate::Tx::prefetch`] hints are acted on (see [`DbConfig::prefetch`]).
    pub(crate) prefetch: bool,
    dir_lookup: bool,
    packed_keys: bool,
    pub(crate) tables: Box<[OnceLock<Table>]>,
    pub(crate) indexes: Box<[OnceLock<Index>]>,
    /// The catalog's name directory, consulted on every operation with `dir-lookup` on
    /// (hashed with Fx, as an engine's catalog cache would be, not SipHash).
    table_names: storage::shard::ReadMostly<FxHashMap<String, u32>>,
    index_names: storage::shard::ReadMostly<FxHashMap<String, u32>>,
    /// Serialises schema changes and catalog writes.
    ddl: Mutex<Catalog>,
    pub(crate) next_txn: crate::active::TxnIds,
    /// Log position past which the next committing transaction takes a fuzzy checkpoint.
    next_checkpoint: AtomicU64,
    /// Where the current checkpoint interval began: the log's end, and the pool's
    /// [`storage::BufferPool::image_bytes`], when the last checkpoint was claimed (see
    /// [`IMAGE_ALLOWANCE`]).
    interval_start: AtomicU64,
    interval_images: AtomicU64,
    /// Held while a checkpoint runs: checkpoints never overlap. (Two that did could finish
    /// out of order, and the later one's discard then took the earlier one's begin record.)
    checkpointing: Mutex<()>,
    /// The thread that takes fuzzy checkpoints, when [`DbConfig::background_checkpoints`].
    pub(crate) checkpointer: Arc<crate::checkpointer::Checkpointer>,
    /// The page cleaner threads, when [`DbConfig::page_cleaners`] is above 0.
    pub(crate) cleaner: Arc<crate::cleaner::Cleaner>,
    /// Fuzzy checkpoints taken by committing transactions (without the checkpointer thread).
    checkpoints_in_commits: AtomicU64,
    /// Commits that waited for the checkpointer thread's checkpoint, it having fallen behind.
    checkpoint_waits: AtomicU64,
    /// Nanoseconds fuzzy checkpoints took (in commits and on the checkpointer thread), in all
    /// and the longest one, since [`Database::take_checkpoint_times`] last read them.
    checkpoint_ns: AtomicU64,
    checkpoint_ns_longest: AtomicU64,
    /// The active-transaction table (`xactions` on): id → its monitoring entry.
    pub(crate) active: crate::active::ActiveTable,
    /// Damage in the middle of the log that this open cut ([`DbConfig::accept_log_loss`]).
    log_loss: Option<wal::LogDamage>,
    /// Whether the emulated devices ([`DbConfig::device`], [`DbConfig::log_device`]) delay
    /// requests now.
    device: Arc<std::sync::atomic::AtomicBool>,
    /// [`DbConfig::early_lock_release`], where it applies: a forced log and locks.
    pub(crate) early_lock_release: bool,
    /// The highest LSN of a commit record whose transaction released its locks before it was
    /// durable (early lock release); a transaction that wrote nothing waits until the log is
    /// durable past it. Written once per updating commit, and only with early lock release.
    pub(crate) released_commits: crossbeam::utils::CachePadded<AtomicU64>,
}

/// What fuzzy checkpoints took ([`Database::take_checkpoint_times`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckpointTimes {
    pub total_ns: u64,
    pub longest_ns: u64,
}

fn io_err(action: &'static str) -> impl FnOnce(std::io::Error) -> TxError {
    move |e| TxError::Storage(storage::StorageError::io(action, e))
}

/// Takes the exclusive lock on `dir/LOCK` (created if absent), or says who holds it: another
/// process, or another open database in this one. Advisory (`flock`); released when the
/// database is dropped or the process ends, however it ends.
fn lock_directory(dir: &std::path::Path) -> TxResult<std::fs::File> {
    let path = dir.join("LOCK");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io_err("open the database directory's lock file"))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(TxError::Invalid(format!(
            "database directory {} is in use: another process (or another open of it in this \
             one) holds {}",
            dir.display(),
            path.display()
        ))),
        Err(std::fs::TryLockError::Error(e)) => Err(io_err("lock the database directory")(e)),
    }
}

/// Checkpoint intervals of log the background checkpointer may fall behind (since the last
/// completed checkpoint's begin) before a committer that makes the next one due waits for the
/// one it is taking.
pub const CHECKPOINTER_LAG_INTERVALS: u64 = 4;

/// How many checkpoint intervals of log, page images included, may pass before the next
/// checkpoint is taken whatever share of it they are. Full-page images do not count toward
/// [`DbConfig::checkpoint_bytes`]: each checkpoint writes pages back, each page written back
/// logs its whole image at its next change, and counted, those images brought the next
/// checkpoint sooner, until on a durable TPC-B run they were five sixths of the log and
/// checkpoints came six times as often (docs/performance.md, "Checkpoints that images do not
/// bring"). An image is one page's write at recovery, so the bound on recovery's work holds;
/// this bounds the log it reads.
pub const IMAGE_ALLOWANCE: u64 = 4;

/// Bytes of log from the last completed checkpoint's begin to `end`, a log end read before
/// it: 0 when that checkpoint began after `end` (the checkpointer appended its begin between
/// the two reads), which is not behind at all.
fn checkpoint_lag(end: Lsn, last_begin: Option<Lsn>) -> u64 {
    last_begin.map_or(0, |begin| end.0.saturating_sub(begin.0))
}

impl Drop for Database {
    /// The last handle is gone without a close (a crash, as far as the files are
    /// concerned): the checkpointer and page cleaner threads end at their next wake-up.
    fn drop(&mut self) {
        self.checkpointer.signal_stop();
        self.cleaner.signal_stop();
    }
}

impl Database {
    /// Opens (creating if absent, recovering if not closed cleanly) a database.
    pub fn open(config: DbConfig) -> TxResult<Arc<Database>> {
        let sw = config.switches;
        sw.validate(config.threads)
            .map_err(|e| TxError::Invalid(e.to_string()))?;
        if sw.optimal {
            return Err(TxError::Invalid(
                "the optimal preset runs the hand-coded kernel, not the engine".into(),
            ));
        }
        let page_access = sw.is_on(Switch::PageAccess);
        if !page_access && config.path.is_some() {
            return Err(TxError::Invalid(
                "page-access=off keeps records in main memory only: it cannot open a database directory (drop --db)".into(),
            ));
        }
        if config.page_locking && !page_access {
            return Err(TxError::Invalid(
                "page-level locking locks heap pages: it needs page-access on".into(),
            ));
        }
        let main_log = sw.is_on(Switch::MainLog);
        let lsn = sw.is_on(Switch::Lsn);
        let latching = sw.is_on(Switch::Latching);
        if config.page_cleaners > 0 && config.path.is_some() && !latching {
            return Err(TxError::Invalid(
                "page cleaners write frames while transactions use the pool: they need latching on (drop --page-cleaners)".into(),
            ));
        }
        let mut catalog = Catalog {
            page_size: if sw.is_on(Switch::SmallPage) {
                8192
            } else {
                32768
            },
            packed_keys: !sw.is_on(Switch::BtreeKeys),
            ..Catalog::default()
        };
        let mut existing = false;
        let mut dir_lock = None;
        if let (Some(dir), false) = (&config.path, config.create) {
            require_files(dir, page_access, main_log)?;
        }
        if let Some(dir) = &config.path {
            storage::file::create_dir_all_durably(dir)
                .map_err(io_err("create database directory"))?;
            dir_lock = Some(lock_directory(dir)?);
            let cat_path = dir.join(CATALOG_FILE);
            if cat_path.exists() {
                let bytes = std::fs::read(&cat_path).map_err(io_err("read catalog"))?;
                let found = parse_catalog(&cat_path, &bytes)?;
                check_creation_switches(&found, &catalog)?;
                catalog = found;
                existing = true;
            }
            check_files_present(dir, existing.then_some(&catalog))?;
            if !existing {
                // The catalog is written first, so that a directory holding a page file or a log
                // but no catalog is known to have lost it (see `check_files_present`).
                let bytes = serde_json::to_vec_pretty(&catalog)
                    .map_err(|e| TxError::Invalid(format!("encode catalog: {e}")))?;
                write_atomically(&cat_path, &bytes)?;
            }
        }
        let page_size = PageSize::from_bytes(catalog.page_size).ok_or_else(|| {
            TxError::Invalid(format!("catalog names page size {}", catalog.page_size))
        })?;
        let mode = if !main_log {
            LogMode::LsnOnly
        } else if sw.is_on(Switch::DiskLog) && config.durable {
            LogMode::Durable
        } else {
            LogMode::NoForce
        };
        // The emulated devices' switch: off while opening (recovery at the machine's speed).
        let device = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (log, log_loss) = if main_log || lsn {
            let storage: Box<dyn wal::LogStorage> = match (&config.path, main_log) {
                (Some(dir), true) => Box::new(
                    wal::FileLogStorage::open_with(
                        dir.join("wal.log"),
                        FileLogOptions {
                            sync: config.log_sync,
                            prealloc_bytes: config.log_prealloc_bytes,
                            segment_bytes: config.log_segment_bytes,
                        },
                    )
                    .map_err(io_err("open log"))?,
                ),
                (None, true) if mode == LogMode::Durable => Box::new(wal::MemLogStorage::new()),
                _ => Box::new(crate::recovery::DiscardLogStorage::default()),
            };
            let storage: Box<dyn wal::LogStorage> = if config.log_device.is_zero() {
                storage
            } else {
                Box::new(crate::recovery::DelayedLogStorage::new(
                    storage,
                    config.log_device,
                    device.clone(),
                ))
            };
            let (log, report) = LogManager::open(
                storage,
                LogConfig {
                    mode,
                    buffer_bytes: 1 << 20,
                    accept_loss: config.accept_log_loss,
                    latching,
                    gather_commits: config.gather_commits,
                    runs: config.log_runs,
                    run_bytes: config.log_run_bytes,
                    // A run without `--durable` keeps the write-ahead rule through a power
                    // loss; `disk-log=off` is the ladder's log that is never forced.
                    sync_write_back: sw.is_on(Switch::DiskLog),
                },
            )
            .map_err(log_open_err)?;
            if let Some(damage) = report.damage {
                // The caller opted in to the loss; a library has no better place to say so
                // that every opener (check, bench, load) shows.
                eprintln!(
                    "warning: {damage}: accepting the loss, the log was cut there, dropping \
                     them ({} bytes); pages written before may still hold some of their \
                     changes, so check the database",
                    damage.bytes
                );
            }
            (Some(Arc::new(log)), report.damage)
        } else {
            (None, None)
        };
        let (mut doublewrite_restored, mut doublewrite_torn, mut doublewrite_us) = (0, 0, 0);
        let mut doublewrite = None;
        let pool = if page_access {
            let store: Box<dyn PageStore> = match &config.path {
                Some(dir) => {
                    let p = dir.join("pages.db");
                    let dw = dir.join(storage::doublewrite::DOUBLEWRITE_FILE);
                    let home = if p.exists() {
                        let home = FilePageStore::open(&p, page_size)?;
                        // Before any page is read: a write a crash tore is put back whole.
                        let began = Instant::now();
                        let done = storage::doublewrite::restore(&dw, &home, page_size.bytes())?;
                        doublewrite_us = began.elapsed().as_micros() as u64;
                        doublewrite_restored = (done.torn + done.older) as u64;
                        doublewrite_torn = done.torn as u64;
                        home
                    } else {
                        // A file left beside no page file is no batch of this database's, nor
                        // a free-space map.
                        storage::doublewrite::forget(&dw)?;
                        SavedFreeSpace::forget(&dir.join(FREE_SPACE_FILE))
                            .map_err(io_err("remove an old free-space map"))?;
                        FilePageStore::create(&p, page_size)?
                    };
                    if config.doublewrite.on(config.durable) {
                        let batch = storage::doublewrite::DEFAULT_BATCH_PAGES;
                        let slots = match config.doublewrite_ring_bytes {
                            Some(bytes) => {
                                storage::doublewrite::slots_in(bytes, page_size.bytes(), batch)
                            }
                            None => storage::doublewrite::slots_for(
                                home.page_count() * page_size.bytes() as u64,
                                page_size.bytes(),
                                batch,
                            ),
                        };
                        let store = storage::DoublewriteStore::new(
                            home,
                            &dw,
                            page_size.bytes(),
                            batch,
                            slots,
                        )?
                        .with_writer()?;
                        doublewrite = Some(store.counters());
                        Box::new(store)
                    } else {
                        // Its batch is in the page file now; pages written without it from
                        // here on must never be put back from it.
                        storage::doublewrite::forget(&dw)?;
                        Box::new(home)
                    }
                }
                None => Box::new(MemPageStore::new(page_size)),
            };
            let store: Box<dyn PageStore> = if config.device.is_none() {
                store
            } else {
                Box::new(
                    storage::DelayedStore::new(store, config.device).with_switch(device.clone()),
                )
            };
            let frames = (config.pool_mib.max(1) << 20) / page_size.bytes();
            let page_log = log.clone().map(|l| l as Arc<dyn PageLog>);
            Some(Arc::new(BufferPool::with_memory(
                store,
                PoolConfig {
                    page_size,
                    frames: frames.max(16),
                    latching,
                },
                page_log,
                if config.huge_pages {
                    FrameMemory::Huge
                } else {
                    FrameMemory::Small
                },
            )?))
        } else {
            None
        };
        if let (Some(pool), Some(_), Some(_)) = (&pool, &log, &config.path) {
            pool.set_full_page_images(
                config
                    .full_page_images
                    .on(config.durable, config.doublewrite.on(config.durable)),
            );
        }
        if let (Some(dir), false) = (&config.path, existing) {
            // The page file and the log were just created: their entries in the directory
            // must be durable before anything they hold is (the catalog's was synced above).
            sync_directory(dir)?;
        }
        let locks = sw.is_on(Switch::Locking).then(|| {
            LockManager::new(LockConfig {
                escalation_threshold: config.escalation_threshold,
                page_level: config.page_locking,
                wait_timeout: config.lock_wait_timeout,
                latching,
                timing: config.lock_timing,
                spin_wait: lock_spin(config.threads),
                coarse_partitions: coarse_lock_partitions(config.threads),
                buckets: lock_buckets(config.threads),
                io_probe: config.attribute_lock_waits.then_some(txn::lock::IoProbe {
                    in_read: |t| storage::buffer::stage::in_read(t.0),
                    period: std::time::Duration::from_micros(200),
                }),
                ..LockConfig::default()
            })
        });
        let mut db = Database {
            pool,
            log,
            log_records: main_log,
            locks,
            xactions: sw.is_on(Switch::Xactions),
            page_locking: config.page_locking,
            read_committed: config.read_committed,
            prefetch: config.prefetch && !sw.is_on(Switch::PageAccess),
            dir_lookup: sw.is_on(Switch::DirLookup),
            packed_keys: catalog.packed_keys,
            tables: (0..MAX_TABLES).map(|_| OnceLock::new()).collect(),
            indexes: (0..MAX_TABLES).map(|_| OnceLock::new()).collect(),
            table_names: storage::shard::ReadMostly::new(FxHashMap::default(), latching),
            index_names: storage::shard::ReadMostly::new(FxHashMap::default(), latching),
            ddl: Mutex::new(Catalog::default()),
            next_txn: crate::active::TxnIds::new(),
            next_checkpoint: AtomicU64::new(u64::MAX),
            interval_start: AtomicU64::new(0),
            interval_images: AtomicU64::new(0),
            checkpointing: Mutex::new(()),
            checkpointer: Default::default(),
            cleaner: Default::default(),
            checkpoints_in_commits: AtomicU64::new(0),
            checkpoint_waits: AtomicU64::new(0),
            checkpoint_ns: AtomicU64::new(0),
            checkpoint_ns_longest: AtomicU64::new(0),
            active: crate::active::ActiveTable::new(latching),
            log_loss,
            device,
            early_lock_release: config.early_lock_release
                && mode == LogMode::Durable
                && main_log
                && sw.is_on(Switch::Locking),
            released_commits: Default::default(),
            config,
            _dir_lock: dir_lock,
            recovery: None,
            doublewrite,
        };
        let mut report = crate::recovery::RecoveryReport {
            doublewrite_restored,
            doublewrite_torn,
            doublewrite_us,
            ..Default::default()
        };
        let redone = if existing && db.log_records {
            let began = Instant::now();
            let redone = crate::recovery::analyze_and_redo(&db, &mut report)?;
            report.redo_us =
                (began.elapsed().as_micros() as u64).saturating_sub(report.analysis_us);
            redone
        } else {
            Default::default()
        };
        // From here on every transaction counts itself a reader of the trees' pages, so an
        // unlinked leaf's page can be handed out again once none that began before it was
        // unlinked is left. The unlinked leaves of the last run (those its last checkpoint
        // listed, and those redo found marked since) no reader can hold: they are free at
        // once. Undo, below, may unlink more.
        if db.config.reuse_pages {
            if let Some(pool) = &db.pool {
                pool.enable_page_reuse();
                let free = storage::btree::unlinked_leaves(pool, redone.reuse_candidates);
                pool.adopt_free_pages(&free);
            }
        }
        // Each heap's free-space map from the map saved at the checkpoint recovery started
        // from, where there is one (see `storage::heap::saved`); not after a log cut short.
        let saved = if existing && db.log_records && db.log_loss.is_none() {
            db.saved_free_space(redone.checkpoint, page_size.bytes())
        } else {
            None
        };
        for t in &catalog.tables {
            let heap = saved.as_ref().and_then(|s| s.heap(PageId(t.first_page)));
            db.install_table(
                t.schema.clone(),
                Some((t.first_page, t.primary_root)),
                heap.map(|h| (h, &redone.changed)),
                &mut report,
            )?;
        }
        for ix in &catalog.indexes {
            db.install_index(ix.schema.clone(), Some(ix.root))?;
        }
        *db.ddl.lock() = catalog;
        let recovering = existing && db.log_records;
        if recovering {
            let began = Instant::now();
            crate::recovery::undo(&db, redone.losers, &mut report)?;
            report.undo_us = began.elapsed().as_micros() as u64;
        }
        // A sharp checkpoint ends every open on disk: after recovery it writes back what redo
        // and undo dirtied, so it is part of recovery's time.
        if db.config.path.is_some() {
            let began = Instant::now();
            let written = db.pool.as_ref().map_or(0, |p| p.io().writes);
            db.checkpoint()?;
            report.checkpoint_us = began.elapsed().as_micros() as u64;
            report.checkpoint_pages = db.pool.as_ref().map_or(0, |p| p.io().writes) - written;
        }
        if recovering {
            db.recovery = Some(report);
        }
        let db = Arc::new(db);
        db.set_device(true);
        // Fuzzy checkpoints during a run bound recovery time and let the log be discarded
        // behind them: on disk, and in memory where the log keeps its records (durable), which
        // would otherwise grow in memory without bound. They read the active-transaction
        // table, so need `xactions`.
        if let (Some(log), true, true) = (&db.log, db.log_records, db.xactions) {
            if db.config.path.is_some() || log.mode() == LogMode::Durable {
                db.start_interval(log.end_lsn().0);
                db.next_checkpoint.store(
                    log.end_lsn()
                        .0
                        .saturating_add(db.config.checkpoint_bytes.max(1)),
                    Ordering::Relaxed,
                );
                if db.config.background_checkpoints && db.config.checkpoint_bytes != u64::MAX {
                    crate::checkpointer::Checkpointer::start(&db).map_err(|e| {
                        TxError::Storage(storage::StorageError::Io {
                            action: "starting the checkpointer thread",
                            source: e,
                        })
                    })?;
                }
            }
        }
        if db.config.page_cleaners > 0 && db.config.path.is_some() && db.pool.is_some() {
            crate::cleaner::Cleaner::start(&db, db.config.page_cleaners).map_err(|e| {
                TxError::Storage(storage::StorageError::Io {
                    action: "starting a page cleaner thread",
                    source: e,
                })
            })?;
        }
        Ok(db)
    }

    /// Turns the emulated devices' latency on or off (on when [`Database::open`] returns): a
    /// benchmark measures with it and loads, warms up and checks at the machine's speed.
    /// Without a device configured, nothing changes.
    pub fn set_device(&self, on: bool) {
        if self.device.load(Ordering::Relaxed) != on {
            self.device.store(on, Ordering::Relaxed);
        }
    }

    /// Damage in the middle of the log that opening cut, losing the records after it: only
    /// with [`DbConfig::accept_log_loss`] (without it such an open fails).
    pub fn log_loss(&self) -> Option<&wal::LogDamage> {
        self.log_loss.as_ref()
    }

    /// The configuration the database was opened with.
    pub fn config(&self) -> &DbConfig {
        &self.config
    }

    /// The buffer pool (absent with `page-access=off`).
    pub fn pool(&self) -> Option<&Arc<BufferPool>> {
        self.pool.as_ref()
    }

    /// What recovery did when this database was opened: `None` for a database created by
    /// the open, or one without log records to recover from.
    pub fn recovery(&self) -> Option<crate::recovery::RecoveryReport> {
        self.recovery
    }

    /// Pages and batches written through the doublewrite file ([`DbConfig::doublewrite`]).
    pub fn doublewrite(&self) -> Option<storage::DoublewriteStats> {
        self.doublewrite.as_ref().map(|c| c.stats())
    }

    /// The counters behind [`Database::doublewrite`], which go on counting through the
    /// close: for what the close's write-back sent through the file.
    pub fn doublewrite_counters(&self) -> Option<Arc<storage::doublewrite::DoublewriteCounters>> {
        self.doublewrite.clone()
    }

    /// The log manager (absent with `main-log=off` and `lsn=off`).
    pub fn log(&self) -> Option<&Arc<LogManager>> {
        self.log.as_ref()
    }

    /// The lock manager (absent with `locking=off`).
    pub fn lock_manager(&self) -> Option<&LockManager> {
        self.locks.as_ref()
    }

    /// The last deadlock the lock manager broke, told with the names of the tables and
    /// indexes whose locks its transactions waited for (a record lock is named by a hash of
    /// its key, which the manager cannot turn back into the key), e.g. `T7 (the victim) waits
    /// for S on a record of order_line (0x81…) → T9 waits for X on a record of stock (0x80…)
    /// → T7`. `None` without locking or before any deadlock.
    pub fn last_deadlock(&self) -> Option<String> {
        let report = self.locks.as_ref()?.last_deadlock()?;
        let space = |id: u32| -> String {
            let index = (id as usize).checked_sub(MAX_TABLES);
            let named = match index {
                Some(ix) => self
                    .index_by_id(ix as u32)
                    .ok()
                    .map(|i| format!("index {}", i.schema.name)),
                None => self.table_by_id(id).ok().map(|t| t.schema.name.clone()),
            };
            named.unwrap_or_else(|| format!("lock space {id}"))
        };
        Some(report.describe(|lock| match lock {
            LockName::Record { table, key } => format!("a record of {} ({key:#x})", space(table)),
            LockName::Page { table, page } => format!("page {page} of {}", space(table)),
            LockName::Table(table) | LockName::TablePart { table, .. } => {
                format!("table {}", space(table))
            }
            LockName::Database | LockName::DatabasePart(_) => "the database".into(),
        }))
    }

    /// Begins a transaction.
    pub fn begin(&self) -> TxResult<Transaction<'_>> {
        Ok(Transaction::begin(self))
    }

    /// Runs `body` in a transaction, committing on success and aborting on error.
    pub fn run<R>(&self, body: impl FnOnce(&mut Transaction<'_>) -> TxResult<R>) -> TxResult<R> {
        let mut t = self.begin()?;
        match body(&mut t) {
            Ok(r) => {
                t.commit()?;
                Ok(r)
            }
            Err(e) => {
                t.abort()?;
                Err(e)
            }
        }
    }

    /// Creates a table, or returns the existing one if a table of this name and schema exists.
    pub fn create_table(&self, schema: TableSchema) -> TxResult<TableRef> {
        let mut cat = self.ddl.lock();
        if let Some(t) = cat.tables.iter().position(|t| t.schema.name == schema.name) {
            if cat.tables[t].schema != schema {
                return Err(TxError::Invalid(format!(
                    "table {} exists with a different schema",
                    schema.name
                )));
            }
            return Ok(TableRef {
                name: schema.name,
                id: t as u32,
            });
        }
        self.refuse_creation("table", &schema.name)?;
        validate_table(&schema)?;
        let id = self.install_table(schema.clone(), None, None, &mut Default::default())?;
        let table = self.table_by_id(id)?;
        cat.tables.push(CatalogTable {
            schema: schema.clone(),
            first_page: table.records.first_page().map_or(0, |p| p.0),
            primary_root: table.primary.root().map_or(0, |p| p.0),
        });
        self.save_catalog(&cat)?;
        Ok(TableRef {
            name: schema.name,
            id,
        })
    }

    /// Creates a secondary index over existing rows, or returns the existing one.
    pub fn create_index(&self, schema: IndexSchema) -> TxResult<IndexRef> {
        let mut cat = self.ddl.lock();
        if let Some(i) = cat
            .indexes
            .iter()
            .position(|i| i.schema.name == schema.name)
        {
            if cat.indexes[i].schema != schema {
                return Err(TxError::Invalid(format!(
                    "index {} exists with a different definition",
                    schema.name
                )));
            }
            return Ok(IndexRef {
                name: schema.name,
                id: i as u32,
            });
        }
        self.refuse_creation("index", &schema.name)?;
        let id = self.install_index(schema.clone(), None)?;
        let index = self.index_by_id(id)?;
        // Index the rows already there.
        let table = self.table_by_id(index.table)?;
        let mut key = Vec::new();
        let mut entries = Vec::new();
        let mut err = None;
        let mut pk = Vec::new();
        table.primary.scan(
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            false,
            usize::MAX,
            |k, loc| {
                pk.push((k.to_vec(), loc));
                true
            },
        )?;
        for (_, loc) in pk {
            table.records.with(loc, |rec| {
                match index.key.encode_record(&table.layout, rec, &mut key) {
                    Ok(()) => entries.push((key.clone(), loc)),
                    Err(e) => err = Some(e),
                }
            })?;
        }
        if let Some(e) = err {
            return Err(e);
        }
        for (k, loc) in entries {
            index.store.insert(&k, loc)?;
        }
        cat.indexes.push(CatalogIndex {
            schema: schema.clone(),
            root: index.store.root().map_or(0, |p| p.0),
        });
        self.save_catalog(&cat)?;
        Ok(IndexRef {
            name: schema.name,
            id,
        })
    }

    /// Resolves a table name to a handle.
    pub fn table(&self, name: &str) -> TxResult<TableRef> {
        let id = self.lookup_table(name)?;
        Ok(TableRef {
            name: name.to_string(),
            id,
        })
    }

    /// Resolves an index name to a handle.
    pub fn index(&self, name: &str) -> TxResult<IndexRef> {
        let id = *self
            .index_names
            .read()
            .get(name)
            .ok_or_else(|| TxError::Invalid(format!("no index named {name}")))?;
        Ok(IndexRef {
            name: name.to_string(),
            id,
        })
    }

    /// The schema of a table.
    pub fn table_schema(&self, table: &TableRef) -> TxResult<TableSchema> {
        Ok(self.resolve_table(table)?.schema.clone())
    }

    /// Names of every table, in creation order.
    pub fn table_names(&self) -> Vec<String> {
        self.ddl
            .lock()
            .tables
            .iter()
            .map(|t| t.schema.name.clone())
            .collect()
    }

    /// Names of every secondary index, in creation order.
    pub fn index_names(&self) -> Vec<String> {
        self.ddl
            .lock()
            .indexes
            .iter()
            .map(|ix| ix.schema.name.clone())
            .collect()
    }

    /// Takes a checkpoint: writes every dirty page and records where recovery may start.
    /// (A sharp checkpoint at open and close; fuzzy checkpoints run from `checkpoint_fuzzy`.)
    pub fn checkpoint(&self) -> TxResult<()> {
        let _one_at_a_time = self.checkpointing.lock();
        crate::recovery::checkpoint(self)
    }

    /// Called after each commit: takes a fuzzy checkpoint when the log has grown past the
    /// threshold (one relaxed load when it has not; one thread wins the race to take it, and
    /// skips it if a checkpoint is still running: the log is checkpointed again at the next
    /// threshold).
    pub(crate) fn maybe_checkpoint(&self) -> TxResult<()> {
        let next = self.next_checkpoint.load(Ordering::Relaxed);
        let Some(log) = &self.log else {
            return Ok(());
        };
        // The buffer is latched only in the last few MiB before the checkpoint is due.
        if !log.end_reached(Lsn(next)) {
            return Ok(());
        }
        let end = log.end_lsn().0;
        if let Some(later) = self.deferred_by_images(end) {
            // Not due yet: the log grew by images. One thread moves the threshold on.
            let _ = self.next_checkpoint.compare_exchange(
                next,
                later,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            return Ok(());
        }
        let claimed = self.next_checkpoint.compare_exchange(
            next,
            end.saturating_add(self.config.checkpoint_bytes.max(1)),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
        if claimed.is_ok() {
            let interval = end.saturating_sub(self.interval_start.load(Ordering::Relaxed));
            self.start_interval(end);
            if self.checkpointer.is_running() {
                // What the last background checkpoint met, told now; then ask for the next.
                if let Some(e) = self.checkpointer.take_error() {
                    return Err(e);
                }
                let behind = checkpoint_lag(Lsn(end), log.last_checkpoint());
                let interval = interval.max(self.config.checkpoint_bytes.max(1));
                if behind > CHECKPOINTER_LAG_INTERVALS.saturating_mul(interval) {
                    // The thread has fallen behind (the workers leave it little CPU): this
                    // commit waits for the checkpoint it is taking, which bounds the log and
                    // recovery as in-line checkpoints did; the next one is asked for below.
                    self.checkpoint_waits.fetch_add(1, Ordering::Relaxed);
                    drop(self.checkpointing.lock());
                }
                self.checkpointer.request();
            } else if let Some(_one_at_a_time) = self.checkpointing.try_lock() {
                self.checkpoints_in_commits.fetch_add(1, Ordering::Relaxed);
                self.timed_fuzzy_checkpoint()?;
            }
        }
        Ok(())
    }

    /// Starts a checkpoint interval at log position `end`, with the pool's image bytes so far.
    fn start_interval(&self, end: u64) {
        self.interval_start.store(end, Ordering::Relaxed);
        let images = self.pool.as_ref().map_or(0, |p| p.image_bytes());
        self.interval_images.store(images, Ordering::Relaxed);
    }

    /// Where the next checkpoint is due instead, when the log has reached the threshold at
    /// `end` only through page images (see [`IMAGE_ALLOWANCE`]); `None` when it is due now.
    fn deferred_by_images(&self, end: u64) -> Option<u64> {
        let pool = self.pool.as_ref()?;
        let images = pool
            .image_bytes()
            .saturating_sub(self.interval_images.load(Ordering::Relaxed));
        if images == 0 {
            return None;
        }
        let interval = self.config.checkpoint_bytes.max(1);
        let grown = end.saturating_sub(self.interval_start.load(Ordering::Relaxed));
        let counted = grown.saturating_sub(images);
        let cap = interval.saturating_mul(IMAGE_ALLOWANCE);
        if counted >= interval || grown >= cap {
            return None;
        }
        Some(end.saturating_add((interval - counted).min(cap - grown)))
    }

    /// A fuzzy checkpoint for the background checkpointer: after any checkpoint still
    /// running.
    pub(crate) fn checkpoint_fuzzy(&self) -> TxResult<()> {
        let _one_at_a_time = self.checkpointing.lock();
        self.timed_fuzzy_checkpoint()
    }

    /// A fuzzy checkpoint (the caller holds `checkpointing`), its time counted for
    /// [`Database::take_checkpoint_times`].
    fn timed_fuzzy_checkpoint(&self) -> TxResult<()> {
        let started = Instant::now();
        let r = crate::recovery::checkpoint(self);
        let ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.checkpoint_ns.fetch_add(ns, Ordering::Relaxed);
        self.checkpoint_ns_longest.fetch_max(ns, Ordering::Relaxed);
        r
    }

    /// The time fuzzy checkpoints (in commits and on the checkpointer thread) took since the
    /// last call, in all and the longest one; both start again from zero. For a run's report:
    /// a checkpoint taken in a commit is that commit's wait, and usually the run's slowest
    /// transaction.
    pub fn take_checkpoint_times(&self) -> CheckpointTimes {
        CheckpointTimes {
            total_ns: self.checkpoint_ns.swap(0, Ordering::Relaxed),
            longest_ns: self.checkpoint_ns_longest.swap(0, Ordering::Relaxed),
        }
    }

    /// Fuzzy checkpoints the background checkpointer has completed.
    pub fn background_checkpoints_taken(&self) -> u64 {
        self.checkpointer.taken()
    }

    /// Fuzzy checkpoints committing transactions have taken (without the checkpointer
    /// thread).
    pub fn checkpoints_in_commits(&self) -> u64 {
        self.checkpoints_in_commits.load(Ordering::Relaxed)
    }

    /// Commits that waited for the checkpointer thread's checkpoint because it had fallen
    /// more than [`CHECKPOINTER_LAG_INTERVALS`] intervals behind the log.
    pub fn checkpoint_waits(&self) -> u64 {
        self.checkpoint_waits.load(Ordering::Relaxed)
    }

    /// The page cleaners' rounds and the pages they wrote so far (zeros without any).
    pub fn page_cleaner_progress(&self) -> (u64, u64) {
        self.cleaner.progress()
    }

    /// Closes the database cleanly: stops the page cleaners (after their rounds) and the
    /// background checkpointer (after the checkpoint it is taking), returns the error either
    /// met, then takes a checkpoint, so the next open recovers nothing.
    pub fn close(self: Arc<Self>) -> TxResult<()> {
        self.cleaner.stop();
        self.checkpointer.stop();
        if let Some(e) = self.checkpointer.take_error() {
            return Err(e);
        }
        if let Some(e) = self.cleaner.take_error() {
            return Err(e);
        }
        if self.config.path.is_some() {
            self.checkpoint()?;
        }
        Ok(())
    }

    /// Ends a bulk load: main-memory ordered indexes (`page-access=off`) merge the entries
    /// inserted since their last scan, which they otherwise merge at the first scan after
    /// (see `storage::memindex`), so a measured run that starts after the load does not pay
    /// for the load's entries; a unique integer one whose keys fill leaves densely switches to
    /// a dense map (`storage::dense_map`), which keeps its own order. Nothing to do for
    /// B+-trees and hash indexes.
    pub fn finish_load(&self) {
        for t in self.tables.iter().filter_map(|t| t.get()) {
            t.primary.merge_pending();
        }
        for ix in self.indexes.iter().filter_map(|i| i.get()) {
            ix.store.merge_pending();
        }
    }

    /// Makes table `name` read-only (`true`) or writable again (`false`). A read-only table
    /// refuses inserts, updates, deletes and reads for update, with an error naming it, and
    /// its point reads take no record lock, only the table's intention lock `IS`: nothing can
    /// change what they read. (TPC-C's ITEM, read by every New-Order and written by none, is
    /// the case: ten record locks per New-Order that every thread shared.) The switch runs in
    /// a transaction of its own that takes the table's lock, `S` to make it read-only (it
    /// waits for the transactions writing it) and `X` to make it writable (it waits for its
    /// readers), so no transaction sees the table change while it runs. The flag is not kept
    /// in the catalog: a reopened database has every table writable.
    pub fn set_read_only(&self, name: &str, read_only: bool) -> TxResult<()> {
        let t = self.table(name)?;
        let table = self.resolve_table(&t)?;
        let mut tx = self.begin()?;
        let mode = if read_only {
            txn::lock::LockMode::S
        } else {
            txn::lock::LockMode::X
        };
        if let Err(e) = tx.lock_whole_table(table.id, mode) {
            tx.abort()?;
            return Err(e);
        }
        table.read_only.store(read_only, Ordering::Release);
        tx.commit()
    }

    /// Index entries main-memory ordered indexes have not merged yet, over every index (0 on
    /// B+-trees and hash indexes, and after [`Database::finish_load`] or a scan of each).
    pub fn pending_index_entries(&self) -> usize {
        let primaries = self.tables.iter().filter_map(|t| t.get());
        let secondaries = self.indexes.iter().filter_map(|i| i.get());
        primaries.map(|t| t.primary.pending()).sum::<usize>()
            + secondaries.map(|i| i.store.pending()).sum::<usize>()
    }

    /// Checks the structural invariants of every index and the pool (tests, stress runs).
    pub fn check_invariants(&self) -> TxResult<()> {
        for t in self.tables.iter().filter_map(|t| t.get()) {
            t.primary.check_invariants()?;
            if let Records::Heap(h) = &t.records {
                h.check_invariants()?;
            }
        }
        for ix in self.indexes.iter().filter_map(|i| i.get()) {
            ix.store.check_invariants()?;
        }
        if let Some(lm) = &self.locks {
            lm.check_invariants();
        }
        Ok(())
    }

    // ---- internals -------------------------------------------------------------------------

    /// Saves every heap file's free-space map, as of the checkpoint beginning at `checkpoint`,
    /// for the next open (see `storage::heap::saved`). Called by a checkpoint after it has
    /// read the dirty page table. Nothing for a database in memory.
    pub(crate) fn save_free_space(&self, checkpoint: Lsn) -> TxResult<()> {
        let (Some(dir), Some(pool)) = (&self.config.path, &self.pool) else {
            return Ok(());
        };
        let mut saved = SavedFreeSpace {
            checkpoint: checkpoint.0,
            page_size: pool.page_size() as u32,
            heaps: Vec::new(),
        };
        for t in self.tables.iter().filter_map(|t| t.get()) {
            if let Records::Heap(h) = &t.records {
                saved.heaps.push(h.free_space_to_save()?);
            }
        }
        saved
            .write(&dir.join(FREE_SPACE_FILE))
            .map_err(io_err("write the free-space map"))
    }

    /// The free-space maps saved at the checkpoint beginning at `checkpoint` (the one recovery
    /// started from), if the file holds that checkpoint's; `None` otherwise (the open then
    /// reads every heap page, as it would without the file).
    fn saved_free_space(
        &self,
        checkpoint: Option<Lsn>,
        page_size: usize,
    ) -> Option<SavedFreeSpace> {
        let dir = self.config.path.as_ref()?;
        let checkpoint = checkpoint?;
        match SavedFreeSpace::read(&dir.join(FREE_SPACE_FILE)) {
            Ok(Some(s)) if s.checkpoint == checkpoint.0 && s.page_size as usize == page_size => {
                Some(s)
            }
            _ => None,
        }
    }

    /// With [`DbConfig::create`] off, the error for a table or index the catalog lacks.
    fn refuse_creation(&self, what: &str, name: &str) -> TxResult<()> {
        if self.config.create {
            return Ok(());
        }
        let catalog = match &self.config.path {
            Some(dir) => format!("{}", dir.join(CATALOG_FILE).display()),
            None => "the catalog".to_string(),
        };
        Err(TxError::Invalid(format!(
            "{catalog} has no {what} named {name}, and this database was opened to find, \
             not create, its {what}s"
        )))
    }

    fn save_catalog(&self, cat: &Catalog) -> TxResult<()> {
        let Some(dir) = &self.config.path else {
            return Ok(());
        };
        // Pages the new table or index allocated must be on disk before the catalog names them.
        if let Some(pool) = &self.pool {
            if let Some(log) = &self.log {
                log.flush_to(log.end_lsn()).map_err(wal_err)?;
            }
            pool.flush_all()?;
        }
        let bytes = serde_json::to_vec_pretty(cat)
            .map_err(|e| TxError::Invalid(format!("encode catalog: {e}")))?;
        write_atomically(&dir.join(CATALOG_FILE), &bytes)
    }

    /// The emulated data device the pages of table `name` (and of its indexes) are
    /// allocated on: 1 for the tables [`DbConfig::second_device_tables`] names, else 0.
    fn device_of(&self, name: &str) -> u8 {
        u8::from(self.config.second_device_tables.iter().any(|t| t == name))
    }

    /// Installs a table: a new one (`existing` none), or one of the catalog's, its heap's
    /// free-space map taken from `saved` (a checkpoint's saved map and the pages changed since)
    /// where it can be, else rebuilt from the whole chain; `report` counts which, and the pages
    /// read.
    fn install_table(
        &self,
        schema: TableSchema,
        existing: Option<(u64, u64)>,
        saved: Option<(&SavedHeap, &HashSet<PageId>)>,
        report: &mut crate::recovery::RecoveryReport,
    ) -> TxResult<u32> {
        let id = self
            .tables
            .iter()
            .position(|t| t.get().is_none())
            .ok_or_else(|| {
                TxError::Invalid(format!("a database holds at most {MAX_TABLES} tables"))
            })? as u32;
        let layout = Layout::new(&schema);
        let key = KeySpec::new(
            &schema.name,
            &layout,
            &schema.primary_key,
            schema.int_key_bits.as_deref(),
            self.packed_keys,
        )?;
        let latching = self.config.switches.is_on(Switch::Latching);
        let device = self.device_of(&schema.name);
        let (records, primary) = match (&self.pool, existing) {
            (Some(pool), None) => (
                Records::Heap(
                    HeapFile::create_on(pool.clone(), device)?
                        .expecting_records_of(layout.record_size())
                        .sharing_insertion_pages(self.config.shared_insert_pages),
                ),
                IndexStore::create(Some(pool), &key, true, false, latching, device)?,
            ),
            (Some(pool), Some((first, root))) => (
                Records::Heap(
                    open_heap(pool, PageId(first), saved, report)?
                        .on_device(device)
                        .expecting_records_of(layout.record_size())
                        .sharing_insertion_pages(self.config.shared_insert_pages),
                ),
                IndexStore::open(pool, PageId(root), &key, true, device),
            ),
            (None, _) => (
                Records::Mem(MemStore::new()),
                IndexStore::create(None, &key, true, false, latching, 0)?,
            ),
        };
        let name = schema.name.clone();
        let table = Table {
            id,
            schema,
            layout,
            indexed_columns: AtomicU64::new(column_mask(&key.columns)),
            key,
            records,
            primary,
            secondaries: storage::shard::ReadMostly::new(Vec::new(), latching),
            read_only: std::sync::atomic::AtomicBool::new(false),
        };
        if self.tables[id as usize].set(table).is_err() {
            return Err(TxError::Invalid("table slot taken concurrently".into()));
        }
        self.table_names.write().insert(name, id);
        Ok(id)
    }

    fn install_index(&self, schema: IndexSchema, root: Option<u64>) -> TxResult<u32> {
        let id = self
            .indexes
            .iter()
            .position(|t| t.get().is_none())
            .ok_or_else(|| {
                TxError::Invalid(format!("a database holds at most {MAX_TABLES} indexes"))
            })? as u32;
        let table_id = self.lookup_table(&schema.table)?;
        let table = self.table_by_id(table_id)?;
        if let Some(c) = schema
            .columns
            .iter()
            .find(|c| **c >= table.layout.columns())
        {
            return Err(TxError::Invalid(format!(
                "index {}: table {} has no column {c}",
                schema.name, schema.table
            )));
        }
        let key = KeySpec::new(
            &schema.name,
            &table.layout,
            &schema.columns,
            schema.int_key_bits.as_deref(),
            self.packed_keys,
        )?;
        let latching = self.config.switches.is_on(Switch::Latching);
        let hash = schema.kind == IndexKind::Hash;
        let device = self.device_of(&schema.table);
        let store = match (root, &self.pool) {
            (Some(root), Some(pool)) if !hash => {
                IndexStore::open(pool, PageId(root), &key, schema.unique, device)
            }
            _ => IndexStore::create(
                self.pool.as_ref(),
                &key,
                schema.unique,
                hash,
                latching,
                device,
            )?,
        };
        let name = schema.name.clone();
        let index_columns = key.columns.clone();
        let index = Index {
            id,
            table: table_id,
            key,
            store,
            schema,
        };
        if self.indexes[id as usize].set(index).is_err() {
            return Err(TxError::Invalid("index slot taken concurrently".into()));
        }
        table
            .indexed_columns
            .fetch_or(column_mask(&index_columns), Ordering::Relaxed);
        table.secondaries.write().push(id);
        self.index_names.write().insert(name, id);
        Ok(id)
    }

    fn lookup_table(&self, name: &str) -> TxResult<u32> {
        self.table_names
            .read()
            .get(name)
            .copied()
            .ok_or_else(|| TxError::Invalid(format!("no table named {name}")))
    }

    /// Finds a table: by name on every call with `dir-lookup` on, by the cached slot with it off.
    #[inline]
    pub(crate) fn resolve_table(&self, t: &TableRef) -> TxResult<&Table> {
        let id = if self.dir_lookup {
            self.lookup_table(&t.name)?
        } else {
            t.id
        };
        self.table_by_id(id)
    }

    #[inline]
    pub(crate) fn resolve_index(&self, ix: &IndexRef) -> TxResult<&Index> {
        let id = if self.dir_lookup {
            *self
                .index_names
                .read()
                .get(&ix.name)
                .ok_or_else(|| TxError::Invalid(format!("no index named {}", ix.name)))?
        } else {
            ix.id
        };
        self.index_by_id(id)
    }

    #[inline]
    pub(crate) fn table_by_id(&self, id: u32) -> TxResult<&Table> {
        self.tables
            .get(id as usize)
            .and_then(|t| t.get())
            .ok_or_else(|| TxError::Invalid(format!("no table with id {id}")))
    }

    #[inline]
    pub(crate) fn index_by_id(&self, id: u32) -> TxResult<&Index> {
        self.indexes
            .get(id as usize)
            .and_then(|t| t.get())
            .ok_or_else(|| TxError::Invalid(format!("no index with id {id}")))
    }

    /// Whether column `col` of `table` is part of the primary key or of a secondary index key.
    pub(crate) fn is_indexed(&self, table: &Table, col: usize) -> bool {
        if col < 64 {
            return table.indexed_columns.load(Ordering::Relaxed) & (1 << col) != 0;
        }
        table.key.columns.contains(&col)
            || table.secondaries.read().iter().any(|ix| {
                self.index_by_id(*ix)
                    .map(|i| i.key.columns.contains(&col))
                    .unwrap_or(false)
            })
    }

    /// The byte spans of a record that an update of columns `mask` (bit `c` for column
    /// `c` < 64) and `wide` (the rest) rewrites, sorted and merged (spans closer than
    /// [`SPAN_MERGE_GAP`] bytes become one; more than [`MAX_SPANS`] become one covering them
    /// all), after checking every column exists and belongs to no index key. A nullable column
    /// adds the null bitmap, which leads the record.
    #[inline(always)]
    pub(crate) fn changed_spans(
        &self,
        table: &Table,
        mask: u64,
        wide: &[usize],
        spans: &mut Vec<(usize, usize)>,
    ) -> TxResult<()> {
        spans.clear();
        if wide.is_empty() && self.spans_by_mask(table, mask, spans) {
            return Ok(());
        }
        let cols: Vec<usize> = (0..64)
            .filter(|c| mask & (1 << c) != 0)
            .chain(wide.iter().copied())
            .collect();
        self.spans_general(table, &cols, spans)
    }

    /// [`Database::changed_spans`] for any columns: collect, sort, merge.
    fn spans_general(
        &self,
        table: &Table,
        cols: &[usize],
        spans: &mut Vec<(usize, usize)>,
    ) -> TxResult<()> {
        let layout = &table.layout;
        spans.clear();
        for &c in cols {
            if c >= layout.columns() {
                return Err(TxError::Invalid(format!(
                    "table {} has no column {c}",
                    table.schema.name
                )));
            }
            if self.is_indexed(table, c) {
                return Err(TxError::Invalid(format!(
                    "column {} of {} is part of an index key and cannot be updated",
                    layout.column_name(c),
                    table.schema.name
                )));
            }
            let r = layout.column_range(c);
            spans.push((r.start, r.end));
            if table.schema.columns[c].nullable {
                spans.push((0, layout.bitmap_len()));
            }
        }
        spans.sort_unstable();
        let mut merged = 0;
        for i in 0..spans.len() {
            let (lo, hi) = spans[i];
            if merged > 0 && lo <= spans[merged - 1].1 + SPAN_MERGE_GAP {
                spans[merged - 1].1 = spans[merged - 1].1.max(hi);
            } else {
                spans[merged] = (lo, hi);
                merged += 1;
            }
        }
        spans.truncate(merged);
        if spans.len() > MAX_SPANS {
            let (lo, hi) = (spans[0].0, spans[spans.len() - 1].1);
            spans.clear();
            spans.push((lo, hi));
        }
        Ok(())
    }

    /// [`Database::changed_spans`] of columns below 64, given as a bit mask, walked in column
    /// order, which is byte order (offsets grow with the column number and the null bitmap
    /// comes first), so the spans come out sorted and are merged as they are pushed. False,
    /// with `spans` to be recomputed, if a column does not exist or is indexed: the general
    /// path reports which.
    #[inline(always)]
    fn spans_by_mask(&self, table: &Table, mask: u64, spans: &mut Vec<(usize, usize)>) -> bool {
        let layout = &table.layout;
        if layout.columns() < 64 && mask >> layout.columns() != 0 {
            return false;
        }
        if mask & table.indexed_columns.load(Ordering::Relaxed) != 0 {
            return false;
        }
        let mut push = |lo: usize, hi: usize| match spans.last_mut() {
            Some(last) if lo <= last.1 + SPAN_MERGE_GAP => last.1 = last.1.max(hi),
            _ => spans.push((lo, hi)),
        };
        if mask & layout.nullable_mask() != 0 {
            push(0, layout.bitmap_len());
        }
        let mut rest = mask;
        while rest != 0 {
            let r = layout.column_range(rest.trailing_zeros() as usize);
            push(r.start, r.end);
            rest &= rest - 1;
        }
        if spans.len() > MAX_SPANS {
            let (lo, hi) = (spans[0].0, spans[spans.len() - 1].1);
            spans.clear();
            spans.push((lo, hi));
        }
        true
    }

    /// Enters `t` in the active-transaction table; returns the shard it went to.
    pub(crate) fn register(&self, t: &Arc<ActiveTxn>) -> usize {
        self.active.register(t)
    }

    pub(crate) fn deregister(&self, t: &ActiveTxn, shard: usize) {
        self.active.deregister(t, shard);
    }

    /// How many transactions the active-transaction table holds (always 0 with `xactions`
    /// off, which keeps no such table).
    pub fn running_transactions(&self) -> usize {
        self.active.len()
    }

    /// (txn, last LSN) of every running transaction.
    pub(crate) fn active_transactions(&self) -> Vec<(TxnId, u64)> {
        self.active.list()
    }

    /// Runs `f` (a checkpoint's begin append) with the active-transaction table latched
    /// exclusively, then reads the table's entries, still latched. Read *after* `f`: a record
    /// appended before the begin has its LSN in its transaction's cell by then (it is stored
    /// under the log buffer latch, which the begin's append takes after it); one appended
    /// after is in the log the analysis scans.
    pub(crate) fn with_active_exclusive<R>(&self, f: impl FnOnce() -> R) -> (R, Vec<RunningTxn>) {
        self.active.with_all_exclusive(f)
    }

    /// Runs `f` (a commit record's append) with the active-transaction table's shard `shard`
    /// latched shared.
    pub(crate) fn with_active_shared<R>(&self, shard: usize, f: impl FnOnce() -> R) -> R {
        self.active.with_shared(shard, f)
    }

    /// Removes a record's primary and secondary index entries (each if present).
    pub(crate) fn remove_entries(
        &self,
        table: &Table,
        rec: &[u8],
        loc: u64,
        key: &mut Vec<u8>,
    ) -> TxResult<()> {
        for ix in table.secondaries.read().iter() {
            let index = self.index_by_id(*ix)?;
            index.key.encode_record(&table.layout, rec, key)?;
            index.store.delete(key, loc)?;
        }
        table.key.encode_record(&table.layout, rec, key)?;
        table.primary.delete(key, loc)?;
        Ok(())
    }

    /// Performs one logical undo action; idempotent (see `undo.rs`).
    pub(crate) fn apply_undo(
        &self,
        op: &UndoOp<'_>,
        key: &mut Vec<u8>,
        rec: &mut Vec<u8>,
    ) -> TxResult<()> {
        let table = self.table_by_id(op.table)?;
        match op.kind {
            KIND_INSERT => {
                let found = table.records.with(op.loc, |r| {
                    rec.clear();
                    rec.extend_from_slice(r);
                })?;
                if found.is_some() {
                    self.remove_entries(table, rec, op.loc, key)?;
                    table.records.delete(op.loc)?;
                }
            }
            KIND_UPDATE => {
                let live = table.records.with(op.loc, |_| ())?;
                if live.is_some() {
                    table
                        .records
                        .write_pieces(op.loc, &[(op.offset as usize, op.before)])?;
                }
            }
            KIND_UPDATE_PIECES => {
                let pieces = crate::undo::pieces(op.before)?;
                let live = table.records.with(op.loc, |_| ())?;
                if live.is_some() {
                    table.records.write_pieces(op.loc, &pieces)?;
                }
            }
            KIND_DELETE => {
                // The record is still there unless the transaction reached its commit, which
                // frees deleted records just before the commit record. Freed, its slot may since
                // hold a record of a transaction that committed first (never one with this key:
                // the deleter held its lock), so the before image goes back to its own slot
                // when that is free, and elsewhere when it is not.
                let ours = table.records.with(op.loc, |r| r == op.before)?;
                let loc = match ours {
                    Some(true) => op.loc,
                    None => table.records.restore(op.loc, op.before)?,
                    Some(false) => table.records.insert(op.before, |_| {})?,
                };
                table.key.encode_record(&table.layout, op.before, key)?;
                if table.primary.get(key)? != Some(loc) {
                    table.primary.insert(key, loc)?;
                }
                for ix in table.secondaries.read().iter() {
                    let index = self.index_by_id(*ix)?;
                    index.key.encode_record(&table.layout, op.before, key)?;
                    match index.store.insert(key, loc) {
                        Ok(()) | Err(storage::StorageError::DuplicateKey) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
            }
            other => {
                return Err(TxError::Invalid(format!("unknown undo kind {other}")));
            }
        }
        Ok(())
    }
}

/// How long a blocked transaction may spin before it sleeps (`LockConfig::spin_wait`):
/// 150 µs when every worker thread has a hardware thread of its own, else none (a spinner
/// could keep the holder it waits for off its core). Within that bound the lock manager
/// spins only while spins mostly see their grant: on a machine busy with other work they do
/// not, and waiters sleep at once (docs/performance.md, "Lock waits"). (The 150 µs bound
/// dates from the lock manager before it adapted: on 2 cores, 2 threads on one TPC-C
/// warehouse, four 4 s runs each, median txn/s: 50 µs gave 32.1K on the paper mix and 16.0K
/// on the full mix, 150 µs 36.7K and 20.4K, 400 µs 35.5K and 20.7K.)
fn lock_spin(threads: usize) -> std::time::Duration {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores > 1 && threads <= cores {
        std::time::Duration::from_micros(150)
    } else {
        std::time::Duration::ZERO
    }
}

/// Lock-table buckets: 256 per thread (see [`txn::lock::LockConfig::buckets`]), so that
/// threads locking different records rarely share a bucket (and each warehouse's record
/// locks have a region of 256 to themselves); one thread keeps the 256 that stay in its cache.
fn lock_buckets(threads: usize) -> usize {
    256 * threads.clamp(1, 256).next_power_of_two()
}

/// Partitions of the database's and each table's lock (`LockConfig::coarse_partitions`): one
/// per worker thread (rounded up to a power of two, at most 64), so that no two threads
/// meet on an intention lock; one thread keeps a single lock per table, as the ladder's
/// one-thread instruction counts assume.
fn coarse_lock_partitions(threads: usize) -> usize {
    threads.clamp(1, 64).next_power_of_two()
}

fn wal_err(e: wal::WalError) -> TxError {
    TxError::Storage(e.into())
}

/// An error opening the log says so (not "flushing the log", as `wal_err` would); the log's
/// own message names the LSN or header concerned.
fn log_open_err(e: wal::WalError) -> TxError {
    match e {
        wal::WalError::Io { action, source } => {
            TxError::Storage(storage::StorageError::Io { action, source })
        }
        wal::WalError::Damaged(damage) => TxError::Storage(storage::StorageError::Io {
            action: "opening the log wal.log",
            source: std::io::Error::other(format!(
                "{}: damage in the middle of the log, not a torn tail; to open the database \
                 anyway, cutting the log there and losing those records, set accept_log_loss \
                 (--accept-log-loss)",
                damage
            )),
        }),
        other => TxError::Storage(storage::StorageError::Io {
            action: "opening the log wal.log",
            source: std::io::Error::other(other),
        }),
    }
}

pub(crate) fn validate_table(schema: &TableSchema) -> TxResult<()> {
    if schema.primary_key.is_empty() {
        return Err(TxError::Invalid(format!(
            "table {} has no primary key",
            schema.name
        )));
    }
    if schema.columns.is_empty() {
        return Err(TxError::Invalid(format!(
            "table {} has no columns",
            schema.name
        )));
    }
    Ok(())
}

/// Refuses a database directory that has lost one of its files, naming it, where opening would
/// otherwise create an empty one over the data and report something misleading (a missing page
/// file read as "page #1 has not been allocated", a missing log as an empty one, a missing
/// catalog as a new database whose tables then hide the real ones). `catalog` is the catalog
/// found, `None` if there is none. A directory with none of the files is a new database; a
/// catalog naming no table yet may lack the others (a crash while the database was created).
/// A log is known to have existed when its master record (`wal.log.master`, written at the
/// first checkpoint, on the first open) is there; without both, the database was created with
/// `main-log=off` and has no log to lose. (An open that must not create has already demanded
/// every file it needs, in [`require_files`]; this guards the opens that may create.)
fn check_files_present(dir: &Path, catalog: Option<&Catalog>) -> TxResult<()> {
    let missing = |what: String| {
        TxError::Storage(storage::StorageError::io(
            "opening the database",
            std::io::Error::new(std::io::ErrorKind::NotFound, what),
        ))
    };
    let pages = dir.join(PAGE_FILE);
    let log = dir.join(LOG_FILE);
    let master = dir.join(format!("{LOG_FILE}.master"));
    let Some(catalog) = catalog else {
        let found: Vec<&str> = [(&pages, PAGE_FILE), (&log, LOG_FILE)]
            .into_iter()
            .filter(|(path, _)| path.exists())
            .map(|(_, name)| name)
            .collect();
        if found.is_empty() {
            return Ok(());
        }
        return Err(missing(format!(
            "the catalog {} is missing, yet the directory holds {}: without the catalog its \
             tables cannot be found, so it is not opened as a new database over them (a \
             database that never held a table can be removed to start afresh)",
            dir.join(CATALOG_FILE).display(),
            found.join(" and ")
        )));
    };
    if !log.exists() && master.exists() {
        return Err(missing(format!(
            "the log {} is missing (its master record {} is there): the database cannot be \
             recovered without it",
            log.display(),
            master.display()
        )));
    }
    if !pages.exists() && !catalog.tables.is_empty() {
        return Err(missing(format!(
            "the page file {} is missing: the catalog names {} tables whose pages it held",
            pages.display(),
            catalog.tables.len()
        )));
    }
    Ok(())
}

/// A database's page size and key path are fixed when it is created.
fn check_creation_switches(found: &Catalog, wanted: &Catalog) -> TxResult<()> {
    if found.page_size != wanted.page_size {
        return Err(TxError::Invalid(format!(
            "the database was created with {} KiB pages; open it with small-page={}",
            found.page_size / 1024,
            if found.page_size == 8192 { "on" } else { "off" }
        )));
    }
    if found.packed_keys != wanted.packed_keys {
        return Err(TxError::Invalid(format!(
            "the database was created with btree-keys={}; open it with the same setting",
            if found.packed_keys { "off" } else { "on" }
        )));
    }
    Ok(())
}

/// Writes a file so that a crash leaves either the old or the new contents.
/// File names inside a database directory.
pub const CATALOG_FILE: &str = "catalog.json";
pub const PAGE_FILE: &str = "pages.db";
pub const LOG_FILE: &str = "wal.log";

/// For an open that must not create ([`DbConfig::create`] off): an error naming the first
/// missing part of the database in `dir` (the page file only with `page-access` on, the log
/// only with `main-log` on).
fn require_files(dir: &Path, page_access: bool, main_log: bool) -> TxResult<()> {
    if !dir.is_dir() {
        return Err(TxError::Invalid(format!(
            "database directory {} does not exist",
            dir.display()
        )));
    }
    let needed = [
        (CATALOG_FILE, true, "the catalog"),
        (PAGE_FILE, page_access, "the page file"),
        (LOG_FILE, main_log, "the log"),
    ];
    for (file, wanted, what) in needed {
        let path = dir.join(file);
        if !wanted || path.is_file() {
            continue;
        }
        let state = if path.exists() {
            "is not a regular file"
        } else {
            "is missing"
        };
        return Err(TxError::Invalid(format!(
            "{} {state} ({what} of the database in {}): the database cannot be opened without \
             it",
            path.display(),
            dir.display()
        )));
    }
    Ok(())
}

fn write_atomically(path: &Path, bytes: &[u8]) -> TxResult<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp).map_err(io_err("create catalog"))?;
    f.write_all(bytes).map_err(io_err("write catalog"))?;
    f.sync_all().map_err(io_err("sync catalog"))?;
    std::fs::rename(&tmp, path).map_err(io_err("rename catalog"))?;
    match path.parent() {
        Some(dir) => sync_directory(dir),
        None => Ok(()),
    }
}

/// Opens the heap file whose chain starts at `first`: with its saved free-space map and the
/// pages changed since where given (and usable), else by reading every page of the chain.
fn open_heap(
    pool: &Arc<BufferPool>,
    first: PageId,
    saved: Option<(&SavedHeap, &HashSet<PageId>)>,
    report: &mut crate::recovery::RecoveryReport,
) -> TxResult<HeapFile> {
    let began = Instant::now();
    let opened = saved.and_then(|(heap, changed)| {
        HeapFile::open_saved(pool.clone(), first, heap, |p| changed.contains(&p)).ok()
    });
    let heap = match opened {
        Some((heap, read)) => {
            report.heaps_saved += 1;
            report.heap_pages_read += read;
            heap
        }
        None => {
            let heap = HeapFile::open(pool.clone(), first)?;
            report.heaps_walked += 1;
            report.heap_pages_read += heap.pages() as u64;
            heap
        }
    };
    report.free_space_us += began.elapsed().as_micros() as u64;
    Ok(heap)
}

/// Makes the entries of `dir` (files created or renamed in it) durable.
fn sync_directory(dir: &Path) -> TxResult<()> {
    storage::file::sync_directory(dir).map_err(io_err("sync the database directory"))
}

impl crate::api::Connection for Database {
    fn table(&self, name: &str) -> TxResult<TableRef> {
        Database::table(self, name)
    }

    fn index(&self, name: &str) -> TxResult<IndexRef> {
        Database::index(self, name)
    }

    fn transaction(
        &self,
        body: &mut dyn FnMut(&mut dyn crate::api::Tx) -> TxResult<()>,
    ) -> TxResult<()> {
        let mut txn = self.begin()?;
        match body(&mut txn) {
            Ok(()) => txn.commit(),
            Err(e) => {
                // The attempt already failed; an abort error would only hide its cause.
                let _ = txn.abort();
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::schema::{IndexKind, IndexSchema, TableSchema};

    #[test]
    fn without_torn_page_guard_turns_off_both_guards_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let config = DbConfig {
            path: Some(dir.path().to_path_buf()),
            pool_mib: 8,
            durable: true,
            full_page_images: FullPageImages::On,
            ..DbConfig::default()
        };
        let bare = config.clone().without_torn_page_guard();
        assert_eq!(bare.doublewrite, Doublewrite::Off);
        assert_eq!(bare.full_page_images, FullPageImages::Off);
        assert_eq!(
            (bare.path.as_deref(), bare.pool_mib, bare.durable),
            (Some(dir.path()), 8, true)
        );
        // Opened so, the database writes its pages back without a doublewrite file.
        Database::open(bare).unwrap().close().unwrap();
        assert!(!dir
            .path()
            .join(storage::doublewrite::DOUBLEWRITE_FILE)
            .exists());
        Database::open(config).unwrap().close().unwrap();
        assert!(dir
            .path()
            .join(storage::doublewrite::DOUBLEWRITE_FILE)
            .exists());
    }

    /// The doublewrite file's ring is sized by the page file at the open: 16 MiB for a small
    /// database, a quarter of a larger one's page file.
    #[test]
    fn the_doublewrite_ring_is_sized_by_the_page_file_at_the_open() {
        let dir = tempfile::tempdir().unwrap();
        let config = DbConfig {
            path: Some(dir.path().to_path_buf()),
            pool_mib: 8,
            ..DbConfig::default()
        };
        let dw = dir.path().join(storage::doublewrite::DOUBLEWRITE_FILE);
        let ring = |slots| {
            storage::doublewrite::Layout {
                slots,
                slot_pages: storage::doublewrite::DEFAULT_BATCH_PAGES,
            }
            .file_len(8192)
        };
        let db = Database::open(config.clone()).unwrap();
        assert_eq!(db.doublewrite().unwrap().ring_bytes, 16 << 20);
        db.close().unwrap();
        assert_eq!(std::fs::metadata(&dw).unwrap().len(), ring(8));
        // A page file of 80 MiB (its tail never written: no page there is in use).
        std::fs::OpenOptions::new()
            .write(true)
            .open(dir.path().join("pages.db"))
            .unwrap()
            .set_len(80 << 20)
            .unwrap();
        let db = Database::open(config).unwrap();
        assert_eq!(db.doublewrite().unwrap().ring_bytes, 20 << 20);
        db.close().unwrap();
        assert_eq!(std::fs::metadata(&dw).unwrap().len(), ring(10));
    }

    /// A committer reads the log's end, then the last checkpoint's begin; a background
    /// checkpoint may begin in between, past that end. (Subtracting without a floor
    /// overflowed there: a debug build panicked in a crash campaign's commit, a release build
    /// took the checkpointer for hopelessly behind and made the commit wait.)
    #[test]
    fn a_checkpoint_begun_after_the_end_read_is_no_lag() {
        assert_eq!(checkpoint_lag(Lsn(1_000), None), 0);
        assert_eq!(checkpoint_lag(Lsn(1_000), Some(Lsn(400))), 600);
        assert_eq!(checkpoint_lag(Lsn(1_000), Some(Lsn(1_000))), 0);
        assert_eq!(checkpoint_lag(Lsn(1_000), Some(Lsn(1_064))), 0);
    }

    /// 20 columns: integers, strings of several widths, some nullable; the key is column 0
    /// and a secondary index covers column 7.
    fn mixed_table(db: &Database) -> u32 {
        let mut schema = TableSchema::new("mixed").int("c0");
        for c in 1..20 {
            schema = match c % 4 {
                0 => schema.string(&format!("c{c}"), 3 + c as u16),
                1 => schema.int(&format!("c{c}")),
                2 => schema.string(&format!("c{c}"), 24).nullable(),
                _ => schema.int(&format!("c{c}")).nullable(),
            };
        }
        let t = db.create_table(schema.key(&["c0"])).unwrap();
        db.create_index(IndexSchema {
            name: "mixed_c7".into(),
            table: "mixed".into(),
            columns: vec![7],
            unique: false,
            kind: IndexKind::BTree,
            int_key_bits: None,
        })
        .unwrap();
        t.id
    }

    /// With `create` off, an open names the first missing part of the database and leaves
    /// the directory as it was; on a complete database it finds the tables the catalog holds
    /// and refuses to create others.
    #[test]
    fn an_open_that_must_not_create_names_what_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let existing = |create| DbConfig {
            path: Some(path.clone()),
            pool_mib: 4,
            create,
            ..DbConfig::default()
        };
        let error = |config| match Database::open(config) {
            Ok(_) => panic!("opened a database that is not there"),
            Err(e) => e.to_string(),
        };
        let message = error(existing(false));
        assert!(message.contains("does not exist"), "{message}");
        assert!(!path.exists(), "the directory was created");

        let db = Database::open(existing(true)).unwrap();
        db.create_table(TableSchema::new("t").int("id").key(&["id"]))
            .unwrap();
        db.close().unwrap();

        let db = Database::open(existing(false)).unwrap();
        assert!(db
            .create_table(TableSchema::new("t").int("id").key(&["id"]))
            .is_ok());
        let message = db
            .create_table(TableSchema::new("u").int("id").key(&["id"]))
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("catalog.json has no table named u"),
            "{message}"
        );
        drop(db);

        for file in [CATALOG_FILE, PAGE_FILE, LOG_FILE] {
            let moved = path.join(format!("{file}.away"));
            std::fs::rename(path.join(file), &moved).unwrap();
            let message = error(existing(false));
            assert!(
                message.contains(&format!("{file} is missing")),
                "{file}: {message}"
            );
            assert!(!path.join(file).exists(), "{file} was created");
            std::fs::rename(&moved, path.join(file)).unwrap();
        }
    }

    /// The bit-mask path computes exactly the spans of the general one (sorted, merged,
    /// bitmap first, at most `MAX_SPANS`), and leaves errors to it.
    #[test]
    fn spans_by_mask_agree_with_the_general_path() {
        let db = Database::open(DbConfig::default()).unwrap();
        let table = db.table_by_id(mixed_table(&db)).unwrap();
        let mut runner = proptest::test_runner::TestRunner::default();
        let cols = proptest::collection::vec(0usize..22, 1..12);
        runner
            .run(&cols, |cols| {
                let mask = cols.iter().fold(0u64, |m, c| m | 1 << c);
                let mut general = Vec::new();
                let expected = db.spans_general(table, &cols, &mut general);
                let mut by_mask = Vec::new();
                let fast = db.spans_by_mask(table, mask, &mut by_mask);
                prop_assert_eq!(fast, expected.is_ok(), "{:?}", expected);
                if fast {
                    prop_assert_eq!(&by_mask, &general);
                    prop_assert!(by_mask.len() <= MAX_SPANS);
                }
                let mut through = Vec::new();
                let got = db.changed_spans(table, mask, &[], &mut through);
                prop_assert_eq!(got.is_ok(), expected.is_ok());
                if got.is_ok() {
                    prop_assert_eq!(through, general);
                }
                Ok(())
            })
            .unwrap();
    }
}
