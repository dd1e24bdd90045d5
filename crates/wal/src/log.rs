//! The log manager: appends records into the log buffer, writes and syncs it (group commit),
//! reads records back, and keeps the master record.
//!
//! # Log file
//!
//! | offset | size | field   | meaning                                             |
//! |-------:|-----:|---------|-----------------------------------------------------|
//! | 0      | 8    | magic   | `b"GLASSWAL"`                                       |
//! | 8      | 4    | version | [`LOG_VERSION`]                                     |
//! | 12     | 4    | crc     | CRC-32C of bytes 0..12                              |
//! | 16     | …    | records | frames back to back (see [`crate::record`]); the first LSN is 16 |
//!
//! # Master record (28 bytes, replaced atomically by the storage)
//!
//! | offset | size | field      | meaning                                     |
//! |-------:|-----:|------------|---------------------------------------------|
//! | 0      | 4    | magic      | `b"GLMR"`                                   |
//! | 4      | 4    | version    | [`MASTER_VERSION`] (3 is read too)          |
//! | 8      | 8    | checkpoint | LSN of the last complete checkpoint's `CheckpointBegin` |
//! | 16     | 8    | start      | the log's start: its first record still held (16 until a discard) |
//! | 24     | 4    | crc        | CRC-32C of bytes 0..24                      |
//!
//! Invariant: `16 <= start <= checkpoint`. Version 2 had no `start` (20 bytes, CRC at 16);
//! version 3 is version 4's layout, written by builds that kept the log in one file.
//! A start past 16 with no checkpoint (0) is written only by an open that accepted the loss of
//! a damaged log's checkpoint ([`LogConfig::accept_loss`]): recovery scans from the start.
//!
//! # Discarding the log behind checkpoints
//!
//! ```text
//!   [ header | discarded (a hole)  | start ... checkpoint begin ... durable end | buffer ]
//!   0        16                    ^ master.start    ^ master.checkpoint
//! ```
//!
//! [`LogManager::discard_before`] moves the start up to the oldest LSN the caller still needs
//! (at most the last checkpoint's begin): it first replaces the master record durably with the
//! new start, and only then lets the storage free the bytes below it ([`LogStorage::discard`]:
//! a punched hole in a file, a dropped prefix in memory). A crash between the two leaves bytes
//! that are never read again. [`LogManager::open`] scans from the master's start, never
//! through the freed bytes (a hole reads as zeros, which a scan from the header would take for
//! a torn tail and cut the whole log there); a log whose scan cannot reach the checkpoint
//! named beside a start is refused as corrupt instead of cut. Reads and scans below the start
//! give [`WalError::Discarded`]. Only `Durable` logs discard: elsewhere the master record is
//! not kept on storage, so a reopen must scan from the first record.
//!
//! # Torn tail or damage
//!
//! [`LogManager::open`] ends the log at its first bad frame (short, bad length, bad checksum).
//! Behind it lies either a torn tail, which is cut quietly, or damage, which fails the open
//! with [`WalError::Damaged`] (or, with [`LogConfig::accept_loss`], is cut and reported):
//!
//! * nothing intact after it (a cut file, garbage or zeros to the end): a torn tail. A process
//!   crash leaves only this, since one writer at a time writes the log front to back;
//! * intact frames after it, with a zeroed sector between (`reader::unwritten_sector_in`):
//!   a torn tail too, what a power loss leaves in the unsynced tail when the page cache wrote
//!   a later page back but not an earlier one. Nothing in it was acknowledged;
//! * intact frames after it and no zeroed sector between, or the master record's checkpoint
//!   among them (the log was synced past the bad frame): damage.
//!
//! # Group commit: a leader forces, the others sleep holding nothing
//!
//! ```text
//!  T1 commit ─ append ─ try writer: leads ─ take buffer ─ write ─ sync ─ synced=end ─ release+notify
//!  T2 commit ─ append ── try writer: busy ─ sleep on force_epoch ............... wake: synced > lsn → return
//!  T3 commit ─ append (after T1's take) ─ sleep ............................... wake: no → leads the next force
//! ```
//!
//! [`LogManager::commit`] is [`LogManager::append_commit`] then [`LogManager::wait_durable`];
//! the engine appends under its own latch (the active-transaction table's shard) and waits
//! after releasing it, so no latch is held while the disk works. `wait_durable` returns at
//! once if `synced` already passed the record. Otherwise, if the *writer latch* is free, the
//! caller is the leader: it takes every buffered byte (its own commit and all appended
//! meanwhile), writes them, syncs once and publishes the new durable end. If a leader is at
//! work, the caller sleeps on a futex word (`force_epoch`), which every release of the writer
//! latch bumps, waking every sleeper with one call: woken, it finds its record durable, or —
//! appended after the last leader's take — leads the next force. No flusher thread and no
//! spinning (on two cores a spinning follower would take the core the leader needs).
//! [`LogStats::commit_batches`] counts the forces that made commits durable; `commits /
//! commit_batches` is the mean group.
//!
//! The sleepers are woken at once rather than one after another: a condition variable's
//! `notify_all` (`parking_lot`'s) moves them onto its mutex, and each then wakes the next as
//! it lets the mutex go, so the last of eight committers a force made durable ran its next
//! transaction only after seven wake-ups in a row. Woken at once, durable TPC-B at 8 threads
//! on this project's 2-core machine gathered a group in 67–87 µs instead of 83–107 and ran
//! 36,600 txn/s instead of 33,400 (medians of ten interleaved rounds; `docs/performance.md`,
//! "Committers woken at once").
//!
//! **Gathering.** Left at that, batches alternate: the committers a force wakes need a moment
//! to run their next transaction, while those that arrived during the force lead the next one
//! at once, so each force carries about half of the committers (durable TPC-B at 8 threads on
//! this project's 2-core machine: 4.4 commits per force). So a leader forcing for a commit
//! first waits ([`LogManager::gather`]) until the buffer holds as many commits as it expects
//! committers, or for at most one force's time (a running mean of write and sync, at most
//! [`MAX_GATHER`]). It expects the threads that waited for a commit in the last two sync
//! windows (a bit per thread, set once per window): a thread that stops committing drops out
//! after two forces. Each committer that goes to sleep behind a gathering leader compares the
//! buffer's commit count with the target and wakes the leader once it is reached. Measured
//! (`glass scale tpcb|tpcc --configs durable --threads 1,8`, interleaved): durable TPC-B at 8
//! threads, 8 commits per force and 28,800–30,200 txn/s, against 4.4 and 27,000–27,300
//! without. Durable TPC-C lost by it (12,000–12,900 txn/s against 13,000–13,600, p99 up by a
//! fifth or more) while its transactions held their locks through the gather, so that
//! committers blocked on them arrived late; with early lock release (the engine's default)
//! they hold none, and durable TPC-C runs as fast either way. [`LogConfig::gather_commits`]
//! is off in this crate's default; the engine's `DbConfig` turns it on (`--commit-gather
//! off` turns it off).
//!
//! Before, followers queued on the writer latch itself, and the engine held the active
//! table's latch shared across the whole force, so a transaction beginning meanwhile (which
//! latches it exclusively) waited for the disk and every later commit queued behind it: on 8
//! threads durable TPC-B made 0.96 forces per commit.
//!
//! Latch order: master latch, writer latch, log buffer latch; a gathering leader takes the
//! `forced` mutex under the writer latch, and no one takes the writer latch holding `forced`.
//! The buffer latch is held only to seal the tail (below) and swap the bytes out, grow them or
//! read them, never during an ordinary append, a write or a sync.
//!
//! # The append path (what one record costs)
//!
//! ```text
//!  frame_len(view)            sum of field sizes (asserts the format's limits)
//!  raise my copy count        my shard's line: no other thread writes it
//!  tail CAS: used += len      the one write every appender shares (buffer::Tail)
//!  publish the LSN, count the record in my shard
//!  encode_frame_into          straight into the reserved bytes: one bounds check + copy per
//!                             field, no Vec growth checks, no scratch copy
//!    crc32c(len, kind..)      SSE 4.2 `crc32`: 8 bytes per instruction, no setup
//!  lower my copy count (release)
//! ```
//!
//! A frame does not contain its own LSN: its length is known before it is encoded, so the
//! bytes are reserved first and the frame encoded into them after. The reservation takes no
//! latch: it is one compare-and-swap on the tail's used bytes ([`crate::buffer::Tail`]), on a
//! line of its own beside a read-mostly window (the region, its capacity, its base LSN). What
//! must see the buffer still — a writer taking it, an append that does not fit (the region
//! grows), a read of buffered bytes, a checkpoint's begin — takes the latch and *seals* the
//! tail: reservations stop, and the sealer waits until every thread's copy count (raised
//! before the reservation, so a thread between its load of the tail and its CAS is counted
//! too) is seen at zero; appenders that find the tail sealed take the latch and wait their
//! turn. A checkpoint's begin is appended sealed, because an append publishes its LSN into its
//! transaction's cell after its reservation: sealing waits for those stores, so the
//! checkpoint, reading the cells after its begin, sees every record before it.
//!
//! Measured on 16 cores (paper mix, one warehouse per thread, `glass scale tpcc --mix paper
//! --configs partitioned`): with the reservation under a spin latch, 40,000 txn/s at one
//! thread, 86,300 at 8 and 58,400 at 16; the threads of a load were found spinning and
//! yielding on the latch. Before that, with the copy under the latch, the paper mix spent its
//! time in the copy's cache misses: the buffer's tail line, last written by the previous
//! holder's copy on another core, was fetched with the latch held, by every append in turn.
//!
//! An operation's undo record (`Update`) and its page's redo record are appended with one
//! reservation: [`LogManager::hold_update_publishing`] encodes the update
//! into a thread-local slot, and the thread's next append to the same log (the redo record,
//! logged as the page's write latch is released) copies both frames in, the update first. The
//! paper mix's New-Order reserved 60 times a transaction before, 37 after.
//!
//! # Modes (the removal ladder)
//!
//! | mode       | ladder switch      | records built | written                  | synced | commit waits |
//! |------------|--------------------|---------------|--------------------------|--------|--------------|
//! | `Durable`  | all on             | yes           | on commit / full buffer  | on commit (group) | yes |
//! | `NoForce`  | not `--durable`    | yes           | when the buffer fills    | before a page written back outruns it; at checkpoints | no |
//! | `NoForce`, no `sync_write_back` | `disk-log=off` | yes | when the buffer fills | at checkpoints only | no |
//! | `LsnOnly`  | `main-log=off`     | no            | never                    | never  | no           |
//!
//! In `LsnOnly` an append is one atomic increment (LSNs grow by one per record and do not
//! name bytes); reading or iterating gives [`WalError::NotLogged`].
//!
//! # Failure
//!
//! A failed write or sync marks the log failed: the bytes stay in memory (readable), and every
//! later flush or durable commit returns [`WalError::Failed`], naming the action that failed
//! first and its cause (`No space left on device`, say) — an fsync error cannot be retried
//! safely, so the engine must stop and recover from what is on disk.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam::utils::CachePadded;
use parking_lot::{Condvar, Mutex, MutexGuard};
use storage::latch::{SpinGuard, SpinLatch};
use storage::page::PageRedo;
use storage::{Lsn, PageId, PageLog, StorageResult};

use crate::buffer::{
    CopyCounts, CopyShard, LogBuffer, Refused, Region, Reserved, Run, Tail, RUN_AHEAD, RUN_BYTES,
    RUN_PREFETCH,
};
use crate::checksum::crc32c;
use crate::error::{LogDamage, WalError, WalResult};
use crate::reader::{look_past, unwritten_sector_in, ChunkReader, FrameAt, LogIter};
use crate::record::{
    check_frame, decode_checked_frame, encode_frame_into, frame_len, CompensationView, Encode,
    FrameCheck, LogRecord, PageRangesView, PageRedoView, RecordKind, TxnId, TxnMarkView,
    UpdatePartsView, UpdateView,
};
use crate::storage::LogStorage;

/// Magic at offset 0 of a log.
pub const LOG_MAGIC: [u8; 8] = *b"GLASSWAL";
/// Format version of the log (and of the master record up to version 3). Version 1 checksummed with CRC-32 (zlib's
/// polynomial); version 2 uses CRC-32C, which CPUs compute in hardware; version 3 adds the
/// log's start to the master record, below which the log may be a hole of zeros (the header
/// changes too, so that a version-2 build refuses such a log instead of cutting it at the
/// hole as a torn tail). A log of another version is refused with
/// [`WalError::UnsupportedVersion`], never misread as torn.
pub const LOG_VERSION: u32 = 3;
/// Format version of the master record written. Version 4 has version 3's layout and says
/// that the log may go on in segment files beside its first (`crate::file`): a build that
/// reads version 3 only kept the log in one file, and would read the first file alone and
/// cut the rest as a torn tail, so it refuses the log instead
/// ([`WalError::UnsupportedVersion`]). This build reads version 3 too: such a log is one file,
/// which opens as a first segment; its first checkpoint writes version 4.
pub const MASTER_VERSION: u32 = 4;
/// Size of the log header; the first record's LSN.
pub const LOG_HEADER_SIZE: usize = 16;
const MASTER_MAGIC: [u8; 4] = *b"GLMR";
const MASTER_SIZE: usize = 28;
/// Bytes read speculatively for a random-access read (most records fit).
const READ_AHEAD_BYTES: usize = 512;

thread_local! {
    /// The `Update` record this thread holds back ([`LogManager::hold_update_publishing`]).
    static HELD: RefCell<HeldFrame> = const { RefCell::new(HeldFrame::EMPTY) };
    /// The log whose held record waits in `HELD` to be carried in (0: none): checked by every
    /// append before it borrows the slot, so an append with nothing to carry pays one load.
    static HELD_WAITING: Cell<u64> = const { Cell::new(0) };
}

/// Lowers a copy count when dropped: the end of a copy into reserved log-buffer bytes.
struct CopyDone<'a>(&'a AtomicU32);

impl Drop for CopyDone<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Release);
    }
}

/// The buffer latch held and the tail sealed ([`LogManager::seal`]): the buffer is the
/// holder's alone. Opens the tail again when dropped.
struct Sealed<'a> {
    buffer: SpinGuard<'a, Box<CachePadded<LogBuffer>>>,
    tail: &'a Tail,
}

impl std::ops::Deref for Sealed<'_> {
    type Target = LogBuffer;

    fn deref(&self) -> &LogBuffer {
        &self.buffer
    }
}

impl std::ops::DerefMut for Sealed<'_> {
    fn deref_mut(&mut self) -> &mut LogBuffer {
        &mut self.buffer
    }
}

impl Drop for Sealed<'_> {
    fn drop(&mut self) {
        self.tail.open(&mut self.buffer);
    }
}

/// Source of [`LogManager`] identities, which tell apart the logs a thread's held record may
/// belong to (tests open several databases on one thread).
static NEXT_LOG_ID: AtomicU64 = AtomicU64::new(1);

/// A thread's held-back `Update` frame: encoded, checksummed, waiting to be copied into the
/// log buffer ahead of the thread's next record to the same log, under the same latch.
struct HeldFrame {
    /// The log it is for ([`LogManager::id`]); 0 when the slot is empty.
    log: u64,
    /// The encoded frame is `frame[..len]` (the vector only grows: no allocation once the
    /// largest update has been held).
    frame: Vec<u8>,
    len: usize,
    /// The transaction's last-LSN cell, given the record's LSN under the buffer latch. Valid
    /// while the [`HeldUpdate`] that owns the slot lives: it borrows the cell.
    publish: *const AtomicU64,
    /// The LSN it was appended at; 0 while it waits.
    lsn: u64,
}

impl HeldFrame {
    const EMPTY: HeldFrame = HeldFrame {
        log: 0,
        frame: Vec::new(),
        len: 0,
        publish: std::ptr::null(),
        lsn: 0,
    };

    /// The frame, if it is `log`'s and still waits to be appended.
    #[inline]
    fn waiting_for(&mut self, log: u64) -> Option<&mut HeldFrame> {
        (self.log == log && self.lsn == 0).then_some(self)
    }

    /// Notes that the frame was given `lsn` (under the buffer latch) and publishes it.
    #[inline]
    fn appended_at(&mut self, lsn: Lsn) {
        // SAFETY: the cell outlives the `HeldUpdate` that holds this slot (it borrows it), and
        // the slot is emptied when that ends (`HeldUpdate::settle`, run by its drop too; the
        // caller of `hold_update_publishing` promised not to leak it).
        if let Some(cell) = unsafe { self.publish.as_ref() } {
            cell.store(lsn.0, Ordering::Relaxed);
        }
        self.lsn = lsn.0;
        let _ = HELD_WAITING.try_with(|w| w.set(0));
    }
}

/// An `Update` record handed to the log but held back by this thread
/// ([`LogManager::hold_update_publishing`]) until its next record to the same log — the redo
/// record of the change the update describes — so that both are copied into the log buffer
/// under one acquisition of its latch. [`HeldUpdate::settle`] gives its LSN, appending it
/// alone if nothing has carried it yet; dropping it unsettled does the same.
#[must_use = "settle it to learn the record's LSN"]
pub struct HeldUpdate<'a> {
    log: &'a LogManager,
    /// Set when the record went into the log at once (`LsnOnly`, or no thread-local slot).
    appended: Option<Lsn>,
    settled: bool,
    /// Borrows the cell the slot points to; not `Send`: the slot is this thread's.
    _cell: std::marker::PhantomData<(&'a AtomicU64, *const ())>,
}

impl HeldUpdate<'_> {
    /// The held record's LSN: appended by now (alone, if no record of this thread carried it).
    #[inline]
    pub fn settle(mut self) -> Lsn {
        self.settle_now()
    }

    fn settle_now(&mut self) -> Lsn {
        self.settled = true;
        if let Some(lsn) = self.appended {
            return lsn;
        }
        let log = self.log;
        let (lsn, buffered) = HELD.with_borrow_mut(|held| {
            debug_assert_eq!(
                held.log, log.id,
                "the slot is this record's until it settles"
            );
            let mut buffered = 0;
            if let Some(waiting) = held.waiting_for(log.id) {
                // Nothing carried it: it goes in alone.
                buffered = log.put(Some(waiting), 0, false, None, None, |_| {}).1;
            }
            held.log = 0;
            held.publish = std::ptr::null();
            (Lsn(std::mem::take(&mut held.lsn)), buffered)
        });
        if buffered >= log.buffer_bytes {
            log.write_full_buffer(buffered);
        }
        lsn
    }
}

impl Drop for HeldUpdate<'_> {
    fn drop(&mut self) {
        if !self.settled {
            self.settle_now();
        }
    }
}

/// What the log does with records and commits; picked by the ladder's switches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LogMode {
    /// Commit waits until its `Commit` record is synced; concurrent commits share one sync.
    #[default]
    Durable,
    /// Commits are not forced: records are built and buffered and written out when the
    /// buffer fills; commit does not wait. A page written back first has the log synced up to
    /// its LSN ([`LogConfig::sync_write_back`]), unless the ladder's `disk-log=off` says the
    /// log is never forced.
    NoForce,
    /// The ladder's `main-log=off` with `lsn` on: no records are built at all, only LSNs are
    /// handed out (an atomic counter), so LSN bookkeeping elsewhere still runs.
    LsnOnly,
}

/// How a log is run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogConfig {
    pub mode: LogMode,
    /// Buffered bytes at which an appender writes the buffer out (appends beyond it wait for
    /// a writer once the buffer holds twice this).
    pub buffer_bytes: usize,
    /// At open, cut the log at damage in its middle (a bad frame with intact records after
    /// it) and report it in [`OpenReport::damage`], instead of failing with
    /// [`WalError::Damaged`]. The records after the damage are lost.
    pub accept_loss: bool,
    /// Whether the log buffer's latch is real; off (the ladder's `latching=off`) only when
    /// one thread uses the log.
    pub latching: bool,
    /// Whether a group-commit leader gathers: waits, for at most one force's time (write and
    /// sync), until the committers it expects have appended their commits, before it forces
    /// (see the module docs). Off (the default), a leader forces at once with whatever is
    /// buffered. Only `Durable` logs gather.
    pub gather_commits: bool,
    /// Whether threads reserve log-buffer bytes for their page-redo records in runs (see
    /// `buffer::Run`): one compare-and-swap on the tail per run instead of one per record,
    /// and no line written by two threads. Only `NoForce` logs with a real latch use runs
    /// (in `Durable` ones every commit would close them all). On by default.
    pub runs: bool,
    /// The bytes a run reserves at once (a record longer than this gets a run of its own
    /// size): more is fewer reservations on the tail, and more padding written where a seal
    /// closes the runs (see `buffer::Run`). [`RUN_BYTES`] by default; at least
    /// [`MIN_RUN_BYTES`], and at most a quarter of the buffer.
    pub run_bytes: usize,
    /// Whether a `NoForce` log syncs, not only writes, what [`LogManager::flush_to`] asks for:
    /// the write-ahead rule held against a power loss, not only a killed process, so that no
    /// page reaches the disk ahead of the records that undo or redo it. The buffer pool asks
    /// before each write-back whose page LSN outruns the synced log. On by default; off only
    /// for the ladder's `disk-log=off` (the log is never forced). `Durable` logs always sync.
    pub sync_write_back: bool,
}

/// The least [`LogConfig::run_bytes`] a log takes (smaller sizes are raised to it): below
/// this a run holds hardly more than one record.
pub const MIN_RUN_BYTES: usize = 256;

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            mode: LogMode::Durable,
            buffer_bytes: 1 << 20,
            accept_loss: false,
            latching: true,
            gather_commits: false,
            runs: true,
            run_bytes: RUN_BYTES,
            sync_write_back: true,
        }
    }
}

/// What [`LogManager::open`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenReport {
    /// The storage held no log (or only part of a header); a fresh header was written.
    pub created: bool,
    /// Where the scan started: the log's start per the master record (16 unless part of the
    /// log was discarded).
    pub start: Lsn,
    /// Intact records found (padding frames not counted).
    pub records: u64,
    /// The LSN the next record gets.
    pub end: Lsn,
    /// Bytes cut from the end (a torn or corrupt tail).
    pub cut_bytes: u64,
    /// Why the scan stopped where it did, when bytes were cut.
    pub cut_reason: Option<&'static str>,
    /// Where the last complete checkpoint begins, per the master record.
    pub checkpoint: Option<Lsn>,
    /// The master record named no `CheckpointBegin` in the intact log and was ignored
    /// (recovery then scans from the first record, which is always correct).
    pub master_ignored: bool,
    /// Damage in the middle of the log, cut because [`LogConfig::accept_loss`] allowed it:
    /// where, and the bytes and intact records dropped with it. The caller should say so.
    pub damage: Option<LogDamage>,
}

/// Counters of a log since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogStats {
    /// Records appended (zero in `LsnOnly`).
    pub records: u64,
    /// Bytes appended (zero in `LsnOnly`): the records' frames, the padding that closed
    /// threads' runs, and the runs' bytes not yet used ([`LogStats::record_bytes`]).
    pub bytes: u64,
    /// Of `bytes`, those that closed threads' runs of reserved bytes (a run's unused end,
    /// filled with a padding frame when the buffer was taken or the thread needed a new run).
    pub padding_bytes: u64,
    /// Of `bytes`, those reserved to threads' runs and not yet used (nor closed).
    pub unused_run_bytes: u64,
    /// Commit records appended.
    pub commits: u64,
    /// Writes of buffered bytes to storage.
    pub writes: u64,
    /// Syncs of storage.
    pub syncs: u64,
    /// Syncs that made at least one commit durable: `commits / commit_batches` is the mean
    /// group-commit batch size.
    pub commit_batches: u64,
    /// Forces whose leader gathered committers first ([`LogConfig::gather_commits`]), and the
    /// nanoseconds those leaders spent gathering.
    pub gathers: u64,
    pub gather_ns: u64,
    /// The log's start: its first record still held.
    pub start: Lsn,
    /// Log bytes below the start (discarded, over the log's whole life, not since opened).
    pub discarded_bytes: u64,
    /// Log bytes from the start to the end: what the log still holds, buffered ones included.
    pub live_bytes: u64,
}

impl LogStats {
    /// The bytes of the records appended: [`LogStats::bytes`] less the runs' padding and
    /// their bytes not yet used.
    pub fn record_bytes(&self) -> u64 {
        self.bytes
            .saturating_sub(self.padding_bytes)
            .saturating_sub(self.unused_run_bytes)
    }
}

const _: () = {
    const fn shared_across_threads<T: Send + Sync>() {}
    shared_across_threads::<LogManager>();
};

/// The master record's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Master {
    /// The last complete checkpoint's begin.
    pub(crate) checkpoint: Option<Lsn>,
    /// The log's first record still held.
    pub(crate) start: Lsn,
}

/// Waiting on a 32-bit word until it changes, and waking every waiter: the operating
/// system's futexes (`atomic-wait`).
#[cfg(not(target_family = "wasm"))]
mod futex {
    pub(super) use atomic_wait::{wait, wake_all};
}

/// A WebAssembly build (the procedures' module) runs one thread, so no committer ever sleeps
/// behind another thread's force; should a threaded one come, a wait yields and looks again.
#[cfg(target_family = "wasm")]
mod futex {
    use std::sync::atomic::{AtomicU32, Ordering};

    pub(super) fn wait(word: &AtomicU32, value: u32) {
        if word.load(Ordering::Acquire) == value {
            std::thread::yield_now();
        }
    }

    pub(super) fn wake_all(_word: &AtomicU32) {}
}

/// The writer latch's state: bytes taken from the buffer until their write completes.
struct Writer {
    /// Taken bytes being written; empty between writes (kept only if a write failed).
    pending: Region,
    /// LSN of `pending[0]`.
    pending_base: u64,
    /// Commit records written but not yet synced.
    commits_unsynced: u64,
}

/// The writer latch held: releasing it wakes every committer sleeping for a force.
struct WriterGuard<'a> {
    guard: Option<MutexGuard<'a, Writer>>,
    log: &'a LogManager,
}

impl Drop for WriterGuard<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        // After the unlock, so that a sleeper that sees the new epoch sees the latch free
        // (or taken again by a later leader, whose release bumps it again).
        self.log.force_epoch.fetch_add(1, Ordering::SeqCst);
        if self.log.sleepers.load(Ordering::SeqCst) > 0 {
            futex::wake_all(&self.log.force_epoch);
        }
    }
}

/// What a gathering leader and the committers arriving behind it share (under
/// [`LogManager::forced`]).
#[derive(Default)]
struct Forced {
    /// While a leader gathers: the commits it waits for, its own included (else 0).
    gathering: u64,
}

/// The longest a leader gathers, whatever a sync takes.
const MAX_GATHER: Duration = Duration::from_millis(2);

/// The write-ahead log. `Send + Sync`; share it as `Arc<LogManager>`.
pub struct LogManager {
    /// This log's identity among the logs of the process (for a thread's held record).
    id: u64,
    mode: LogMode,
    storage: Box<dyn LogStorage>,
    /// Buffered bytes at which an appender writes the buffer out.
    buffer_bytes: usize,
    /// The log buffer latch: serialises the sealers of the tail (`Sealed`), who then own the
    /// buffered frames and their base LSN; an ordinary append does not take it. A spin latch:
    /// its holder keeps it for a swap or a short wait for copies, and appenders that find the
    /// tail sealed wait on it that long. The latch word has a cache line of its own.
    buffer: CachePadded<SpinLatch<Box<CachePadded<LogBuffer>>>>,
    /// Where appenders reserve bytes without the latch ([`LogManager::put`]).
    tail: Tail,
    /// The log's end when it was opened (bytes appended since are the end's distance from it).
    opened_end: u64,
    /// Copies into the buffer under way outside its latch, and the append counters, per
    /// thread shard ([`LogManager::put`]).
    copies: CopyCounts,
    /// The writer latch: serialises writes and syncs; its holder is the group-commit leader.
    /// Protects the bytes taken from the buffer until they are written. Taken before `buffer`.
    writer: Mutex<Writer>,
    /// What a gathering leader and the committers behind it share.
    forced: Mutex<Forced>,
    /// Bumped each time the writer latch is released: committers whose record a leader is
    /// forcing sleep on it (a futex) until it moves, holding nothing, and the release wakes
    /// them all with one call ([`LogManager::sleep_while_forcing`]).
    force_epoch: AtomicU32,
    /// Committers asleep on `force_epoch` (or about to be): a release with none makes no call.
    sleepers: AtomicU32,
    /// Where a gathering leader waits (under `forced`) for the committers it expects.
    gather_cv: Condvar,
    /// Whether leaders gather ([`LogConfig::gather_commits`]).
    gather: bool,
    /// Whether a `NoForce` log's `flush_to` syncs ([`LogConfig::sync_write_back`]).
    sync_write_back: bool,
    /// Whether page-redo records are reserved in runs ([`LogConfig::runs`]).
    runs: bool,
    /// The bytes a run reserves at once ([`LogConfig::run_bytes`], bounded).
    run_bytes: usize,
    /// Threads (one bit per `thread_index % 64`) that waited for a commit since the last
    /// sync, and those of the sync before it: the size of their union is how many committers
    /// the next leader expects, itself included (`expected`).
    committers: AtomicU64,
    committers_before: AtomicU64,
    expected: AtomicU32,
    /// Commit records in the buffer, not yet taken by a writer (`LogBuffer::commits_buffered`,
    /// copied under the buffer latch when leaders gather): what a gathering leader waits on.
    commits_buffered: AtomicU64,
    /// A commit force's duration (write and sync), nanoseconds, as a running mean: the
    /// longest a leader gathers.
    force_ns: AtomicU64,
    /// Forces whose leader gathered, and the nanoseconds it spent gathering.
    gathers: AtomicU64,
    gather_ns: AtomicU64,
    /// Every byte below this is written to storage. Only grows; set under `writer`.
    written: AtomicU64,
    /// Every byte below this is synced. Only grows; set under `writer`.
    synced: AtomicU64,
    /// A write or sync failed; nothing more is made durable.
    failed: AtomicBool,
    /// The first failed write or sync: its action and cause, reported by every later
    /// [`WalError::Failed`]. Set once, before `failed`.
    failure: Mutex<Option<(&'static str, Arc<std::io::Error>)>>,
    /// `LsnOnly`: the next LSN to hand out.
    next_lsn: AtomicU64,
    /// The master latch: the master record's contents as last written (or, outside `Durable`
    /// mode, as kept in memory); serialises master-record writes and discards.
    master: Mutex<Master>,
    /// The log's start (`master.start`, readable without the latch): no record below it is
    /// read. Only grows; set under `master` after the master record names it.
    start: AtomicU64,
    writes: AtomicU64,
    syncs: AtomicU64,
    commit_batches: AtomicU64,
}

impl LogManager {
    /// Opens the log: scans from its start (per the master record) to the last intact record;
    /// a torn or corrupt tail (short record, bad length, bad checksum) ends the log cleanly
    /// there and is truncated. A bad frame with intact records after it is damage in the
    /// middle of the log, not a tail, unless a crash explains it (see *Torn tail or damage*
    /// above): the open
    /// fails with [`WalError::Damaged`], or with [`LogConfig::accept_loss`] cuts the log there
    /// and reports it in [`OpenReport::damage`]. A record whose checksum holds but whose body does not decode is
    /// corruption, not a torn write, and fails the open. So does a log part of which was
    /// discarded whose scan stops before the checkpoint the master record names: cutting there
    /// would drop records the checkpoint made durable.
    pub fn open(
        storage: Box<dyn LogStorage>,
        config: LogConfig,
    ) -> WalResult<(LogManager, OpenReport)> {
        let len = storage
            .len()
            .map_err(|e| WalError::io("measuring the log", e))?;
        let first = LOG_HEADER_SIZE as u64;
        let mut report = OpenReport {
            created: false,
            start: Lsn(first),
            records: 0,
            end: Lsn(first),
            cut_bytes: 0,
            cut_reason: None,
            checkpoint: None,
            master_ignored: false,
            damage: None,
        };
        let mut master = Master {
            checkpoint: None,
            start: Lsn(first),
        };
        if len < first {
            // New, or a crash tore the header while the log was being created (before any
            // master record could name it).
            if let Some(found) = read_master(storage.as_ref())? {
                if found.start.0 > first {
                    return Err(WalError::BadHeader(
                        "the master record names a discarded log, but the log file is empty",
                    ));
                }
                report.master_ignored = true;
            }
            storage
                .truncate(0)
                .and_then(|()| storage.write_at(0, &log_header()))
                .and_then(|()| storage.sync())
                .map_err(|e| WalError::io("creating the log header", e))?;
            report.created = true;
            report.cut_bytes = len;
        } else {
            let mut header = [0u8; LOG_HEADER_SIZE];
            storage
                .read_at(0, &mut header)
                .map_err(|e| WalError::io("reading the log header", e))?;
            if header[..8] != LOG_MAGIC {
                return Err(WalError::BadHeader("wrong magic"));
            }
            let version = u32::from_le_bytes([header[8], header[9], header[10], header[11]]);
            if version != LOG_VERSION {
                return Err(WalError::UnsupportedVersion {
                    what: "log",
                    found: version,
                    supported: LOG_VERSION,
                });
            }
            if header != log_header() {
                return Err(WalError::BadHeader("bad header checksum"));
            }
            let found = read_master(storage.as_ref())?;
            let start = found.map_or(first, |m| m.start.0);
            if let Some(gap) = storage.missing().into_iter().find(|gap| gap.end > start) {
                return Err(WalError::Missing {
                    from: Lsn(gap.start.max(start)),
                    to: Lsn(gap.end),
                });
            }
            if start > len {
                return Err(WalError::BadHeader(
                    "the master record names a start past the end of the log",
                ));
            }
            // With part of the log discarded the scan must pass this frame (the checkpoint's
            // begin); without, the master is merely ignored if it does not.
            let must_reach = found.and_then(|m| m.checkpoint).filter(|_| start > first);
            let mut chunk = ChunkReader::new();
            let mut pos = start;
            let mut checkpoint_seen = None;
            loop {
                let at = chunk
                    .frame(storage.as_ref(), pos, len)
                    .map_err(|e| WalError::io("scanning the log", e))?;
                match at {
                    FrameAt::Complete(frame_len) => {
                        let record =
                            decode_checked_frame(chunk.frame_bytes(pos, frame_len), Lsn(pos))?;
                        if found.and_then(|m| m.checkpoint) == Some(Lsn(pos))
                            && record == LogRecord::CheckpointBegin
                        {
                            checkpoint_seen = Some(Lsn(pos));
                        }
                        // A closed run's padding is no record.
                        if !matches!(record, LogRecord::Padding { .. }) {
                            report.records += 1;
                        }
                        pos += frame_len as u64;
                    }
                    FrameAt::End(reason) => {
                        if pos < len {
                            let checkpoint = found.and_then(|m| m.checkpoint);
                            if let Some(damage) =
                                damage_at(storage.as_ref(), pos, len, reason, checkpoint)?
                            {
                                if !config.accept_loss {
                                    return Err(WalError::Damaged(damage));
                                }
                                report.damage = Some(damage);
                            }
                        }
                        let unreached = must_reach.filter(|_| checkpoint_seen.is_none());
                        // An accepted loss may drop the checkpoint too: recovery then scans
                        // from the start, which holds every record it needed.
                        if let Some(checkpoint) = unreached.filter(|_| report.damage.is_none()) {
                            return Err(WalError::Corrupt {
                                lsn: Lsn(pos),
                                reason: if pos <= checkpoint.0 {
                                    "the log ends before the checkpoint the master record names"
                                } else {
                                    "the master record names no checkpoint begin record"
                                },
                            });
                        }
                        if pos < len {
                            report.cut_reason = Some(reason);
                        }
                        break;
                    }
                }
            }
            if pos < len {
                storage
                    .truncate(pos)
                    .map_err(|e| WalError::io("cutting the torn log tail", e))?;
                report.cut_bytes = len - pos;
            }
            report.start = Lsn(start);
            report.end = Lsn(pos);
            if let Some(m) = found {
                master.start = m.start;
                if checkpoint_seen.is_some() {
                    master.checkpoint = checkpoint_seen;
                    report.checkpoint = checkpoint_seen;
                } else {
                    report.master_ignored = true;
                    if m.start.0 > first && m.checkpoint.is_some() {
                        // Only an accepted loss gets here (else the scan failed above): the
                        // master must stop naming the cut checkpoint, or the next open would
                        // refuse the log it just cut.
                        storage
                            .write_master(&encode_master(master))
                            .map_err(|e| WalError::io("writing the master record", e))?;
                    }
                }
            }
        }
        let end = report.end.0;
        let log = LogManager {
            id: NEXT_LOG_ID.fetch_add(1, Ordering::Relaxed),
            mode: config.mode,
            storage,
            buffer_bytes: config.buffer_bytes.max(1),
            buffer: CachePadded::new(SpinLatch::new(
                Box::new(CachePadded::new(LogBuffer::new(
                    end,
                    config.buffer_bytes.max(1) * 2,
                ))),
                config.latching,
            )),
            tail: Tail::new(),
            opened_end: end,
            copies: CopyCounts::new(),
            writer: Mutex::new(Writer {
                pending: Region::with_capacity(config.buffer_bytes.max(1) * 2),
                pending_base: end,
                commits_unsynced: 0,
            }),
            forced: Mutex::new(Forced::default()),
            force_epoch: AtomicU32::new(0),
            sleepers: AtomicU32::new(0),
            gather_cv: Condvar::new(),
            gather: config.gather_commits && config.mode == LogMode::Durable,
            runs: config.runs && config.mode == LogMode::NoForce && config.latching,
            sync_write_back: config.sync_write_back,
            run_bytes: config
                .run_bytes
                .min(config.buffer_bytes / 4)
                .max(MIN_RUN_BYTES),
            committers: AtomicU64::new(0),
            committers_before: AtomicU64::new(0),
            expected: AtomicU32::new(0),
            commits_buffered: AtomicU64::new(0),
            force_ns: AtomicU64::new(0),
            gathers: AtomicU64::new(0),
            gather_ns: AtomicU64::new(0),
            written: AtomicU64::new(end),
            synced: AtomicU64::new(end),
            failed: AtomicBool::new(false),
            failure: Mutex::new(None),
            next_lsn: AtomicU64::new(end),
            start: AtomicU64::new(master.start.0),
            master: Mutex::new(master),
            writes: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
            commit_batches: AtomicU64::new(0),
        };
        log.tail.open(&mut log.buffer.lock());
        Ok((log, report))
    }

    pub fn mode(&self) -> LogMode {
        self.mode
    }

    pub(crate) fn storage(&self) -> &dyn LogStorage {
        self.storage.as_ref()
    }

    pub(crate) fn written_end(&self) -> u64 {
        self.written.load(Ordering::Acquire)
    }

    // -----------------------------------------------------------------------------------------
    // Appending

    /// Appends any record; returns its LSN. Allocates nothing beyond the record itself.
    pub fn append(&self, record: &LogRecord) -> Lsn {
        if record.kind() == RecordKind::CheckpointBegin && self.mode != LogMode::LsnOnly {
            return self.append_barrier(record);
        }
        self.append_encoded(record, record.kind() == RecordKind::Commit, None)
    }

    /// Appends `record` after every reservation made before it is done, its LSNs published
    /// into their cells: a checkpoint's begin, after which the checkpoint reads those cells.
    /// (An append without the latch publishes its LSN after its reservation, so a later
    /// reservation alone does not order the two.)
    #[cold]
    fn append_barrier(&self, record: &LogRecord) -> Lsn {
        storage::shared::bump(storage::shared::Place::LogAppend);
        let len = frame_len(record);
        let shard = self.copies.mine();
        let counted = self.buffer.is_enabled();
        let reserved = self.reserve_sealed(len, true, counted);
        shard.records.fetch_add(1, Ordering::Relaxed);
        {
            let _copying = counted.then(|| CopyDone(&shard.copies));
            // SAFETY: as in `put`.
            unsafe { encode_frame_into(record, std::slice::from_raw_parts_mut(reserved.to, len)) };
        }
        if reserved.used >= self.buffer_bytes {
            self.write_full_buffer(reserved.used);
        }
        reserved.lsn
    }

    /// [`LogManager::append`], storing the record's LSN into `last_lsn` (a transaction's
    /// last-LSN cell, which checkpoints read) before the buffer latch is released. So a
    /// checkpoint that appends its `CheckpointBegin` and then reads the cell sees every record
    /// of the transaction that precedes the begin: storing after the append returned left a
    /// window in which a record lay before the begin with the cell still naming the one before
    /// it, and recovery, starting at the begin, would not have undone it.
    pub fn append_publishing(&self, record: &LogRecord, last_lsn: Option<&AtomicU64>) -> Lsn {
        self.append_encoded(record, record.kind() == RecordKind::Commit, last_lsn)
    }

    /// Appends an `Update` encoded from its borrowed fields (no `LogRecord` is built).
    pub fn append_update(&self, txn: TxnId, prev: Lsn, payload: &[u8]) -> Lsn {
        self.append_encoded(&UpdateView { txn, prev, payload }, false, None)
    }

    /// [`LogManager::append_update`] publishing its LSN into `last_lsn` under the buffer latch
    /// (see [`LogManager::append_publishing`]).
    pub fn append_update_publishing(
        &self,
        txn: TxnId,
        prev: Lsn,
        payload: &[u8],
        last_lsn: Option<&AtomicU64>,
    ) -> Lsn {
        self.append_encoded(&UpdateView { txn, prev, payload }, false, last_lsn)
    }

    /// [`LogManager::append_update_publishing`], held back: the record is encoded now and
    /// copied into the log buffer just ahead of this thread's next record to this log, under
    /// the same latch acquisition, or by [`HeldUpdate::settle`]. For an undo record written
    /// just before a page change, whose redo record comes next: one latch acquisition for both
    /// instead of two, on the latch every appending thread shares. Both are still appended
    /// before the page's latch is released (its redo record is appended then), in the same
    /// order as before, so the log says exactly what it said; only a record of another thread
    /// can no longer fall between the two.
    ///
    /// One held record per thread at a time: settle (or drop) one before holding the next.
    ///
    /// # Safety
    ///
    /// The returned [`HeldUpdate`] must be settled or dropped, never leaked (`mem::forget`,
    /// a reference cycle): until then the thread's slot keeps a pointer to `last_lsn`, which
    /// the next append of this thread to this log writes through. The borrow keeps the cell
    /// alive only as long as the token; a leaked token would leave the pointer behind.
    #[inline]
    pub unsafe fn hold_update_publishing<'a>(
        &'a self,
        txn: TxnId,
        prev: Lsn,
        payload: &[u8],
        last_lsn: Option<&'a AtomicU64>,
    ) -> HeldUpdate<'a> {
        // SAFETY: passed on to the caller (this function's own contract).
        unsafe { self.hold_update_parts_publishing(txn, prev, &[payload], last_lsn) }
    }

    /// [`LogManager::hold_update_publishing`] with the payload given in parts, encoded one
    /// after the other straight into the held frame: a caller whose payload is a header and
    /// a before image need not gather them into a buffer first.
    ///
    /// # Safety
    ///
    /// As [`LogManager::hold_update_publishing`].
    #[inline]
    pub unsafe fn hold_update_parts_publishing<'a>(
        &'a self,
        txn: TxnId,
        prev: Lsn,
        parts: &[&[u8]],
        last_lsn: Option<&'a AtomicU64>,
    ) -> HeldUpdate<'a> {
        let view = UpdatePartsView { txn, prev, parts };
        let held = if self.mode == LogMode::LsnOnly {
            None
        } else {
            HELD.try_with(|held| {
                let mut held = held.try_borrow_mut().ok()?;
                assert_eq!(held.log, 0, "a thread holds one update record at a time");
                let len = frame_len(&view);
                if held.frame.len() < len {
                    held.frame.resize(len, 0);
                }
                encode_frame_into(&view, &mut held.frame[..len]);
                held.len = len;
                held.log = self.id;
                held.lsn = 0;
                HELD_WAITING.set(self.id);
                held.publish = last_lsn.map_or(std::ptr::null(), |c| c as *const AtomicU64);
                Some(())
            })
            .ok()
            .flatten()
        };
        let appended = match held {
            Some(()) => None,
            None => Some(self.append_encoded(&view, false, last_lsn)),
        };
        HeldUpdate {
            log: self,
            appended,
            settled: false,
            _cell: std::marker::PhantomData,
        }
    }

    /// Appends a `Compensation` encoded from its borrowed fields (no `LogRecord` is built).
    pub fn append_compensation(
        &self,
        txn: TxnId,
        prev: Lsn,
        undo_next: Lsn,
        payload: &[u8],
    ) -> Lsn {
        self.append_compensation_publishing(txn, prev, undo_next, payload, None)
    }

    /// [`LogManager::append_compensation`] publishing its LSN into `last_lsn` under the buffer
    /// latch (see [`LogManager::append_publishing`]).
    pub fn append_compensation_publishing(
        &self,
        txn: TxnId,
        prev: Lsn,
        undo_next: Lsn,
        payload: &[u8],
        last_lsn: Option<&AtomicU64>,
    ) -> Lsn {
        let view = CompensationView {
            txn,
            prev,
            undo_next,
            payload,
        };
        self.append_encoded(&view, false, last_lsn)
    }

    /// Appends an `Abort` (rollback begins).
    pub fn append_abort(&self, txn: TxnId, prev: Lsn) -> Lsn {
        let kind = RecordKind::Abort;
        self.append_encoded(&TxnMarkView { kind, txn, prev }, false, None)
    }

    /// Appends an `End` (the transaction is finished: committed or fully rolled back).
    pub fn append_end(&self, txn: TxnId, prev: Lsn) -> Lsn {
        let kind = RecordKind::End;
        self.append_encoded(&TxnMarkView { kind, txn, prev }, false, None)
    }

    /// Appends `Commit`; in `Durable` mode returns only once it is durable (group commit).
    pub fn commit(&self, txn: TxnId, prev: Lsn) -> WalResult<Lsn> {
        let lsn = self.append_commit(txn, prev);
        self.wait_durable(lsn)?;
        Ok(lsn)
    }

    /// Appends `Commit` and returns at once: the first half of [`LogManager::commit`], for a
    /// caller that must append under a latch of its own but should not wait under it.
    pub fn append_commit(&self, txn: TxnId, prev: Lsn) -> Lsn {
        let kind = RecordKind::Commit;
        self.append_encoded(&TxnMarkView { kind, txn, prev }, true, None)
    }

    /// In `Durable` mode, returns once the record at `lsn` is durable (group commit: see the
    /// module docs); in the other modes at once.
    pub fn wait_durable(&self, lsn: Lsn) -> WalResult<()> {
        if self.mode == LogMode::Durable {
            self.flush_until(lsn, true, true)?;
        }
        Ok(())
    }

    /// Reserves bytes in the log buffer for `record`, behind this thread's held record if
    /// one waits, and encodes it once, straight into them (checksum included; see
    /// [`LogManager::put`]). `publish` receives the LSN before the latch is released.
    #[inline]
    fn append_encoded<E: Encode>(
        &self,
        record: &E,
        is_commit: bool,
        publish: Option<&AtomicU64>,
    ) -> Lsn {
        self.append_encoded_run(record, is_commit, publish, None)
    }

    /// [`LogManager::append_encoded`], for a page's redo record where `run` is given: the
    /// page's LSN, which the record's must exceed. Such a record may take its bytes from this
    /// thread's run ([`LogManager::put`]).
    #[inline]
    fn append_encoded_run<E: Encode>(
        &self,
        record: &E,
        is_commit: bool,
        publish: Option<&AtomicU64>,
        run: Option<Lsn>,
    ) -> Lsn {
        if self.mode == LogMode::LsnOnly {
            storage::shared::bump(storage::shared::Place::LogAppend);
            let lsn = self.next_lsn.fetch_add(1, Ordering::Relaxed);
            if let Some(cell) = publish {
                cell.store(lsn, Ordering::Relaxed);
            }
            return Lsn(lsn);
        }
        let len = frame_len(record);
        // Most appends carry nothing: they skip the held slot's borrow altogether.
        if HELD_WAITING.try_with(Cell::get).ok() != Some(self.id) {
            return self.encode_and_put(record, len, None, is_commit, publish, run);
        }
        let mut done = None;
        let _ = HELD.try_with(|held| {
            if let Ok(mut held) = held.try_borrow_mut() {
                let waiting = held.waiting_for(self.id);
                done = Some(self.encode_and_put(record, len, waiting, is_commit, publish, run));
            }
        });
        // No slot (thread teardown) or one already borrowed: nothing waits to be carried.
        done.unwrap_or_else(|| self.encode_and_put(record, len, None, is_commit, publish, run))
    }

    /// The rest of [`LogManager::append_encoded`]: reserves `len` bytes behind `held` and
    /// encodes `record` straight into them; writes a full buffer out.
    #[inline(always)]
    fn encode_and_put<E: Encode>(
        &self,
        record: &E,
        len: usize,
        held: Option<&mut HeldFrame>,
        is_commit: bool,
        publish: Option<&AtomicU64>,
        run: Option<Lsn>,
    ) -> Lsn {
        let (lsn, buffered) = self.put(held, len, is_commit, publish, run, |frame| {
            encode_frame_into(record, frame)
        });
        if buffered >= self.buffer_bytes {
            self.write_full_buffer(buffered);
        }
        lsn
    }

    /// Puts `held` (this thread's held update, if one waits to be carried) and then a frame
    /// of `len` bytes, which `fill` writes (nothing for the held one alone), into the log
    /// buffer; returns the LSN of the frame (of the held one, if `len` is 0) and the bytes
    /// then buffered.
    ///
    /// The reservation is one compare-and-swap on the tail ([`Tail::try_reserve`]), with
    /// this thread's copy count raised first, so that a sealer waits for the copy; the LSNs
    /// are published into their cells, the counters of this thread's shard counted, the held
    /// frame copied and `fill` run, and then the count goes down. Where the tail is sealed or
    /// the region full, and for a `barrier` (a record every earlier reservation must be
    /// published before: a checkpoint's begin), the reservation is made under the latch with
    /// the tail sealed instead ([`LogManager::reserve_sealed`]).
    #[inline(always)]
    fn put(
        &self,
        mut held: Option<&mut HeldFrame>,
        len: usize,
        is_commit: bool,
        publish: Option<&AtomicU64>,
        run: Option<Lsn>,
        fill: impl FnOnce(&mut [u8]),
    ) -> (Lsn, usize) {
        let held_len = held.as_ref().map_or(0, |h| h.len);
        let total = held_len + len;
        let frames = u64::from(held.is_some()) + u64::from(len > 0);
        let (shard, exclusive) = self.copies.mine_exclusive();
        // Without latching there is one thread: nobody seals, nobody waits for a copy.
        let counted = self.buffer.is_enabled();
        if counted {
            shard.copies.fetch_add(1, Ordering::SeqCst);
        }
        let runs = self.runs && exclusive;
        let in_run = match run.filter(|_| runs) {
            Some(after) => self.reserve_in_run(&shard.run, total, after),
            None => None,
        };
        let reserved = match in_run {
            Some(reserved) => reserved,
            None => {
                storage::shared::bump(storage::shared::Place::LogAppend);
                let reserved = match self.tail.try_reserve(total) {
                    Ok(reserved) => reserved,
                    Err(refused) => self.reserve_refused(total, refused, shard, counted),
                };
                // A record from the tail lies past the thread's run: its transaction's next
                // records must too (a compensation before the redo of its undo), so the run
                // is closed. A commit ends its transaction, and the next one's records may lie
                // below it, so a commit keeps the run.
                if runs && !is_commit {
                    self.close_my_run(&shard.run);
                }
                reserved
            }
        };
        let mut lsn = reserved.lsn;
        if let Some(h) = held.as_deref_mut() {
            h.appended_at(lsn);
            if len > 0 {
                lsn = Lsn(lsn.0 + held_len as u64);
            }
        }
        if let Some(cell) = publish.filter(|_| len > 0) {
            cell.store(lsn.0, Ordering::Relaxed);
        }
        // Counted before the copy is done, so a sealer that waited for it sees them.
        shard.records.fetch_add(frames, Ordering::Relaxed);
        if is_commit {
            self.count_commit(shard);
        }
        crate::buffer::prefetch_ahead(&reserved, total);
        // The guard lowers the count even if `fill` panics, so that no sealer waits forever.
        let _copying = counted.then(|| CopyDone(&shard.copies));
        // SAFETY: the reservation gave `total` bytes at `to`, inside the region and no one
        // else's (no other slice covers them); a sealer waits for the copy count before it
        // reads, moves or swaps the region, so it is neither freed nor moved meanwhile.
        unsafe {
            if let Some(h) = held {
                std::ptr::copy_nonoverlapping(h.frame.as_ptr(), reserved.to, held_len);
            }
            fill(std::slice::from_raw_parts_mut(
                reserved.to.add(held_len),
                len,
            ));
        }
        (lsn, reserved.used)
    }

    /// Counts a commit record in this thread's shard (and, where leaders gather, in the
    /// shared count they wait on).
    #[inline]
    fn count_commit(&self, shard: &CopyShard) {
        shard.commits.fetch_add(1, Ordering::Relaxed);
        shard.commits_buffered.fetch_add(1, Ordering::Relaxed);
        if self.gather {
            self.commits_buffered.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Reserves `total` bytes for a page-redo record (with the undo record it carries) in
    /// this thread's run, starting a new run from the tail where the record does not fit or
    /// where the run's next LSN is not above `after`, the LSN of the page it changes: a
    /// page's LSNs must rise in the log's order, and a run reserved earlier may lie below
    /// a record another thread has since stamped into the page (every run started later lies
    /// above it). `None` where the tail is sealed or the region full: the caller reserves
    /// from the tail. The caller's copy count is raised; this thread's shard is its alone.
    #[inline]
    fn reserve_in_run(&self, run: &Run, total: usize, after: Lsn) -> Option<Reserved> {
        let (used, region, base) = self.tail.open_window()?;
        if let Some(at) = run.fits(total) {
            if base + at as u64 > after.0 {
                let end = at + total;
                run.at.store(end, Ordering::Relaxed);
                let to = region.wrapping_add(at);
                let left = run.end.load(Ordering::Relaxed) - end;
                crate::buffer::prefetch_window(to, total, left, RUN_AHEAD);
                return Some(Reserved {
                    lsn: Lsn(base + at as u64),
                    to,
                    used,
                    // Fetched for writing above, and as the run began (`new_run`).
                    room: 0,
                });
            }
        }
        self.new_run(run, total, region)
    }

    /// Closes this thread's run and reserves a new one from the tail holding `total` bytes
    /// first; `None` if the tail refuses (the run stays closed).
    #[cold]
    #[inline(never)]
    fn new_run(&self, run: &Run, total: usize, region: *mut u8) -> Option<Reserved> {
        // SAFETY: the tail was seen open with this thread's copy count raised: no sealer has
        // closed the run since (it would have waited for the count), so it lies in `region`.
        unsafe { run.close(region) };
        storage::shared::bump(storage::shared::Place::LogAppend);
        let bytes = Run::bytes_for(total, self.run_bytes);
        let reserved = self.tail.try_reserve(bytes).ok()?;
        let at = reserved.to as usize - region as usize;
        run.at.store(at + total, Ordering::Relaxed);
        run.end.store(at + bytes, Ordering::Relaxed);
        // The run's first lines (for a short run, all of it and as many past it: the next run,
        // where one thread appends) are fetched for writing at once: its records come within
        // a transaction, and the buffer is cold (see `buffer::prefetch_ahead`, which serves
        // records from the tail). A longer run's later lines are fetched ahead of its records
        // (`reserve_in_run`).
        let ahead = (bytes + self.run_bytes.min(reserved.room)).min(RUN_PREFETCH.max(total));
        storage::prefetch::range_for_write(reserved.to, ahead);
        Some(Reserved {
            room: 0,
            ..reserved
        })
    }

    /// Closes this thread's run, if it has one, after a reservation from the tail (copy count
    /// raised: no sealer runs).
    #[inline]
    fn close_my_run(&self, run: &Run) {
        if run.at.load(Ordering::Relaxed) == run.end.load(Ordering::Relaxed) {
            return;
        }
        if let Some((_, region, _)) = self.tail.open_window() {
            // SAFETY: as in `new_run`: the run lies in the open region.
            unsafe { run.close(region) };
        }
    }

    /// Reserves `total` bytes where [`Tail::try_reserve`] refused. A sealed tail is waited
    /// for with the copy count down, and tried again, without the latch: appenders that
    /// queued on the latch and sealed in turn would keep the tail sealed, and everyone
    /// arriving meanwhile would queue behind them (on 16 cores the paper mix fell from
    /// 3.5 times one thread at 8 threads to 1.3 times at 16, its threads found sealing in
    /// turn). A full region is grown under the latch ([`LogManager::reserve_sealed`]).
    #[cold]
    #[inline(never)]
    fn reserve_refused(
        &self,
        total: usize,
        mut refused: Refused,
        shard: &CopyShard,
        counted: bool,
    ) -> Reserved {
        while refused == Refused::Sealed && counted {
            shard.copies.fetch_sub(1, Ordering::Release);
            self.tail.wait_open();
            shard.copies.fetch_add(1, Ordering::SeqCst);
            match self.tail.try_reserve(total) {
                Ok(reserved) => return reserved,
                Err(again) => refused = again,
            }
        }
        self.reserve_sealed(total, false, counted)
    }

    /// Reserves `total` bytes under the latch with the tail sealed: where the region is full,
    /// and for a `barrier`. A full region grows (its copies are
    /// drained by the seal). The caller's copy count (raised if `counted`) is lowered while
    /// this waits, since a sealer waits for it, and raised again for the new reservation
    /// before the tail opens.
    #[cold]
    #[inline(never)]
    fn reserve_sealed(&self, total: usize, barrier: bool, counted: bool) -> Reserved {
        let shard = self.copies.mine();
        if counted && !barrier {
            shard.copies.fetch_sub(1, Ordering::Release);
        }
        let mut buffer = self.seal();
        if !buffer.has_room(total) {
            buffer.grow(total);
        }
        let reserved = buffer.reserve(total);
        if counted {
            shard.copies.fetch_add(1, Ordering::SeqCst);
        }
        reserved
    }

    /// Takes the buffer latch and seals the tail: no reservation starts, every copy into
    /// reserved bytes is done, and the buffer is the caller's until the guard drops.
    fn seal(&self) -> Sealed<'_> {
        let mut buffer = self.buffer.lock();
        self.tail.seal(&mut buffer, &self.copies);
        buffer.close_runs(&self.copies);
        Sealed {
            buffer,
            tail: &self.tail,
        }
    }

    /// A full buffer is written out by the appender that filled it, unless a writer is already
    /// busy; once the buffer holds twice its size, appenders wait for the writer (backpressure).
    #[cold]
    fn write_full_buffer(&self, buffered: usize) {
        let writer = if buffered >= 2 * self.buffer_bytes {
            Some(self.lock_writer())
        } else {
            self.try_lock_writer()
        };
        if let Some(mut writer) = writer {
            // An error marks the log failed; the next flush or durable commit reports it.
            let _ = self.write_out(&mut writer);
        }
    }

    /// Takes the writer latch; its release wakes the committers waiting for a force.
    fn lock_writer(&self) -> WriterGuard<'_> {
        WriterGuard {
            guard: Some(self.writer.lock()),
            log: self,
        }
    }

    fn try_lock_writer(&self) -> Option<WriterGuard<'_>> {
        Some(WriterGuard {
            guard: Some(self.writer.try_lock()?),
            log: self,
        })
    }

    // -----------------------------------------------------------------------------------------
    // Writing and syncing

    /// Writes the log up to and including the record at `lsn` and syncs it: write + sync
    /// (`Durable`, and `NoForce` with [`LogConfig::sync_write_back`]), write only (`NoForce`
    /// under the ladder's `disk-log=off`), nothing (`LsnOnly`). An `lsn` at or past the end
    /// flushes everything appended so far. What the buffer pool calls before it writes a page
    /// back (the write-ahead rule).
    pub fn flush_to(&self, lsn: Lsn) -> WalResult<()> {
        match self.mode {
            LogMode::Durable => self.flush_until(lsn, true, false),
            LogMode::NoForce => self.flush_until(lsn, self.sync_write_back, false),
            LogMode::LsnOnly => Ok(()),
        }
    }

    /// Group commit. A caller whose record is not yet written (and synced) becomes the leader
    /// if the writer latch is free: it writes and syncs everything buffered, its own record
    /// and every record appended before it took the buffer. If a leader is already at work,
    /// the caller sleeps on `force_epoch`, holding nothing, until that leader is done; then it
    /// finds its record durable, or leads the next force (its record came after the last
    /// leader's take) with everything appended meanwhile. A leader forcing for a `commit`
    /// first gathers ([`LogManager::gather`]).
    fn flush_until(&self, lsn: Lsn, sync: bool, commit: bool) -> WalResult<()> {
        let reached = if sync { &self.synced } else { &self.written };
        if commit && self.gather && reached.load(Ordering::Acquire) <= lsn.0 {
            self.note_committer();
        }
        loop {
            if reached.load(Ordering::Acquire) > lsn.0 {
                return Ok(());
            }
            if self.failed.load(Ordering::Acquire) {
                return Err(self.failed_error());
            }
            storage::shared::bump(storage::shared::Place::LogForce);
            if let Some(mut writer) = self.try_lock_writer() {
                if reached.load(Ordering::Acquire) > lsn.0 {
                    return Ok(());
                }
                // A commit's leader gathers first, and times the force it then makes.
                let gathering = commit && self.gather;
                let started = gathering.then(|| {
                    self.gather();
                    Instant::now()
                });
                self.write_out(&mut writer)?;
                if sync {
                    self.sync_written(&mut writer)?;
                }
                if let Some(started) = started {
                    // A running mean over about eight forces (write and sync: with `O_DSYNC`
                    // the write is the force).
                    let took = started.elapsed().as_nanos() as u64;
                    let mean = self.force_ns.load(Ordering::Relaxed);
                    let mean = if mean == 0 {
                        took
                    } else {
                        mean - mean / 8 + took / 8
                    };
                    self.force_ns.store(mean, Ordering::Relaxed);
                }
                return Ok(());
            }
            // Another thread holds the writer latch: wake it if it gathers for a group this
            // commit completes, then sleep until it is done. Without gathering there is no
            // one to wake, and `forced` is not taken.
            if self.gather {
                let forced = self.forced.lock();
                if forced.gathering != 0
                    && self.commits_buffered.load(Ordering::Relaxed) >= forced.gathering
                {
                    self.gather_cv.notify_one();
                }
            }
            self.sleep_while_forcing(reached, lsn);
        }
    }

    /// Sleeps, holding nothing, while another thread holds the writer latch and the record at
    /// `lsn` is not yet past `reached`. The epoch is read before the latch: a release after
    /// that read has bumped it, so the wait returns at once or is woken; a release before it
    /// is seen in the latch.
    fn sleep_while_forcing(&self, reached: &AtomicU64, lsn: Lsn) {
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        loop {
            let epoch = self.force_epoch.load(Ordering::SeqCst);
            if reached.load(Ordering::Acquire) > lsn.0
                || !self.writer.is_locked()
                || self.failed.load(Ordering::Acquire)
            {
                break;
            }
            futex::wait(&self.force_epoch, epoch);
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
    }

    /// Marks this thread among the committers of the current sync window (one bit per
    /// thread, written only the first time in a window).
    #[inline]
    fn note_committer(&self) {
        let bit = 1u64 << (storage::shard::thread_index() % 64);
        if self.committers.load(Ordering::Relaxed) & bit == 0 {
            self.committers.fetch_or(bit, Ordering::Relaxed);
        }
    }

    /// A leader forcing for a commit, before it takes the buffer, waits until the buffer holds
    /// as many commits as it expects committers (its own included), or for at most one
    /// force's time ([`LogManager::force_ns`], at most [`MAX_GATHER`]). Each committer that
    /// goes to sleep behind the leader checks the count and wakes it once it is reached.
    /// Called with the writer latch held.
    ///
    /// Without it, batches alternate: the committers a force wakes need a moment to run their
    /// next transaction, while those that arrived during the force lead the next one at
    /// once, so each force carries about half of the committers (on this project's 2-core
    /// machine, durable TPC-B at 8 threads made 4.4 commits per force).
    fn gather(&self) {
        let expected = self.expected.load(Ordering::Relaxed);
        if expected <= 1 {
            return;
        }
        let budget = Duration::from_nanos(self.force_ns.load(Ordering::Relaxed)).min(MAX_GATHER);
        let started = Instant::now();
        let deadline = started + budget;
        let expected = u64::from(expected);
        let mut forced = self.forced.lock();
        if self.commits_buffered.load(Ordering::Relaxed) >= expected {
            return;
        }
        forced.gathering = expected;
        while self.commits_buffered.load(Ordering::Relaxed) < expected {
            if self.gather_cv.wait_until(&mut forced, deadline).timed_out() {
                break;
            }
        }
        forced.gathering = 0;
        drop(forced);
        self.gathers.fetch_add(1, Ordering::Relaxed);
        self.gather_ns
            .fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    /// Takes every buffered byte and writes it. Called with the writer latch held.
    fn write_out(&self, writer: &mut WriterGuard<'_>) -> WalResult<()> {
        let writer = writer.guard.as_mut().expect("held until dropped");
        if self.failed.load(Ordering::Acquire) {
            return Err(self.failed_error());
        }
        {
            // Sealed: the copies into the bytes taken are done, and every commit in them is
            // counted.
            let mut buffer = self.seal();
            if buffer.bytes.is_empty() {
                return Ok(());
            }
            let taken = buffer.take(&mut writer.pending);
            if self.gather {
                self.commits_buffered.store(0, Ordering::Relaxed);
            }
            writer.pending_base = taken.base;
            writer.commits_unsynced += self.copies.take_commits_buffered();
        }
        let end = writer.pending_base + writer.pending.len() as u64;
        if let Err(e) = self
            .storage
            .write_at(writer.pending_base, writer.pending.as_slice())
        {
            return Err(self.fail("writing the log", e));
        }
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.written.store(end, Ordering::Release);
        writer.pending.clear();
        Ok(())
    }

    /// Syncs every written byte. Called with the writer latch held.
    fn sync_written(&self, writer: &mut WriterGuard<'_>) -> WalResult<()> {
        let writer = writer.guard.as_mut().expect("held until dropped");
        let target = self.written.load(Ordering::Acquire);
        if self.synced.load(Ordering::Acquire) >= target {
            return Ok(());
        }
        if let Err(e) = self.storage.sync() {
            return Err(self.fail("syncing the log", e));
        }
        if self.gather {
            // The committers of this sync's window and the one before: how many the next
            // leader expects.
            let now = self.committers.swap(0, Ordering::Relaxed);
            let before = self.committers_before.swap(now, Ordering::Relaxed);
            self.expected
                .store((now | before).count_ones(), Ordering::Relaxed);
        }
        self.syncs.fetch_add(1, Ordering::Relaxed);
        if writer.commits_unsynced > 0 {
            self.commit_batches.fetch_add(1, Ordering::Relaxed);
            writer.commits_unsynced = 0;
        }
        self.synced.store(target, Ordering::Release);
        Ok(())
    }

    /// Marks the log failed, keeping the first failure's action and cause for every later
    /// [`WalError::Failed`]; returns the error to give the caller that met it.
    fn fail(&self, action: &'static str, err: std::io::Error) -> WalError {
        {
            let mut failure = self.failure.lock();
            if failure.is_none() {
                // `io::Error` is not `Clone`: keep an equal one (same OS code, same message).
                let kept = match err.raw_os_error() {
                    Some(code) => std::io::Error::from_raw_os_error(code),
                    None => std::io::Error::new(err.kind(), err.to_string()),
                };
                *failure = Some((action, Arc::new(kept)));
            }
        }
        self.failed.store(true, Ordering::Release);
        WalError::io(action, err)
    }

    /// The sticky error of a failed log: what failed first, and why.
    fn failed_error(&self) -> WalError {
        let (action, source) = self.failure.lock().clone().unwrap_or_else(|| {
            (
                "a write or sync",
                Arc::new(std::io::Error::other("cause not recorded")),
            )
        });
        WalError::Failed { action, source }
    }

    /// Every record with an LSN below this is as durable as the mode makes records: synced
    /// (`Durable`), written to storage (`NoForce`), or — there being no records — the end
    /// (`LsnOnly`).
    pub fn durable_lsn(&self) -> Lsn {
        match self.mode {
            LogMode::Durable => Lsn(self.synced.load(Ordering::Acquire)),
            LogMode::NoForce => Lsn(self.written.load(Ordering::Acquire)),
            LogMode::LsnOnly => self.end_lsn(),
        }
    }

    /// The log's end: every record appended so far lies below it. The next record appended
    /// from the tail gets it; one a thread appends into its run may still lie below it.
    pub fn end_lsn(&self) -> Lsn {
        match self.mode {
            LogMode::LsnOnly => Lsn(self.next_lsn.load(Ordering::Relaxed)),
            _ => {
                storage::shared::bump(storage::shared::Place::LogEnd);
                // The latch keeps the window still; the tail's used bytes are read as they are.
                let _buffer = self.buffer.lock();
                Lsn(self.tail.end())
            }
        }
    }

    /// A lower bound on [`LogManager::end_lsn`] read without the buffer latch: the end of
    /// what is written to storage (the end itself in `LsnOnly`). At most the buffer's size
    /// behind the end; for callers on every transaction's path that need no more (is a
    /// checkpoint due? where may a transaction's first record lie at the earliest?), so that
    /// they do not latch the buffer every thread appends to.
    pub fn end_lower_bound(&self) -> Lsn {
        match self.mode {
            LogMode::LsnOnly => Lsn(self.next_lsn.load(Ordering::Relaxed)),
            _ => Lsn(self.written.load(Ordering::Acquire)),
        }
    }

    /// Whether the log's end has reached `target`, latching the buffer only when the answer
    /// is not plain from the written end: the end lies between it and the written end plus
    /// twice the buffer (appenders wait for a writer beyond that). For a check made at every
    /// commit (is a checkpoint due?) that must neither latch the buffer each time nor run a
    /// buffer's length late.
    pub fn end_reached(&self, target: Lsn) -> bool {
        let written = self.end_lower_bound().0;
        if written >= target.0 {
            return true;
        }
        if self.mode == LogMode::LsnOnly
            || written.saturating_add(2 * self.buffer_bytes as u64) < target.0
        {
            return false;
        }
        self.end_lsn() >= target
    }

    /// The LSN of the first record the log still holds: just past the header, or the start a
    /// discard moved it to ([`LogManager::discard_before`]).
    pub fn first_lsn(&self) -> Lsn {
        Lsn(self.start.load(Ordering::Acquire))
    }

    // -----------------------------------------------------------------------------------------
    // Reading

    /// Reads the record at `lsn`, wherever it is: buffered, being written, or on storage.
    /// `lsn` must be a record's LSN; any other position gives an error, never a wrong record
    /// (short of a checksum collision).
    pub fn read(&self, lsn: Lsn) -> WalResult<LogRecord> {
        self.read_frame(lsn).map(|(record, _)| record)
    }

    /// Forward scan from `lsn` (a record's LSN) to the end: analysis and redo.
    pub fn iter_from(&self, lsn: Lsn) -> LogIter<'_> {
        LogIter::new(self, lsn)
    }

    /// Reads the record at `lsn` and its frame length.
    pub(crate) fn read_frame(&self, lsn: Lsn) -> WalResult<(LogRecord, usize)> {
        if self.mode == LogMode::LsnOnly {
            return Err(WalError::NotLogged);
        }
        let out_of_range = || WalError::OutOfRange {
            lsn,
            first: self.first_lsn(),
            end: self.end_lsn(),
        };
        if lsn.0 < LOG_HEADER_SIZE as u64 {
            return Err(out_of_range());
        }
        self.check_not_discarded(lsn)?;
        loop {
            {
                let buffer = self.seal();
                if lsn.0 >= buffer.base {
                    // Sealed: other threads' frames are copied in, and none starts.
                    // (The end is read from the held latch: `end_lsn` would take it again.)
                    let bytes = buffer.bytes_from(lsn.0).ok_or(WalError::OutOfRange {
                        lsn,
                        first: self.first_lsn(),
                        end: Lsn(buffer.end()),
                    })?;
                    return LogRecord::decode(bytes, lsn);
                }
            }
            let written = self.written.load(Ordering::Acquire);
            if lsn.0 < written {
                // A discard may have freed the bytes while they were read.
                return self
                    .read_from_storage(lsn, written)
                    .or_else(|e| self.check_not_discarded(lsn).and(Err(e)));
            }
            // Taken from the buffer but not yet written: wait for the writer, then look at
            // what it holds (it keeps the bytes if the write failed).
            let guard = self.lock_writer();
            let writer = guard.guard.as_ref().expect("held until dropped");
            let pending_end = writer.pending_base + writer.pending.len() as u64;
            if lsn.0 >= writer.pending_base && lsn.0 < pending_end {
                let at = (lsn.0 - writer.pending_base) as usize;
                return LogRecord::decode(&writer.pending.as_slice()[at..], lsn);
            }
        }
    }

    /// [`WalError::Discarded`] if `lsn` lies below the log's start.
    pub(crate) fn check_not_discarded(&self, lsn: Lsn) -> WalResult<()> {
        let start = self.first_lsn();
        if lsn < start {
            return Err(WalError::Discarded { lsn, start });
        }
        Ok(())
    }

    /// Reads the record at `lsn` from storage, which holds valid log bytes below `limit`.
    fn read_from_storage(&self, lsn: Lsn, limit: u64) -> WalResult<(LogRecord, usize)> {
        let available = (limit - lsn.0) as usize;
        let mut bytes = vec![0u8; READ_AHEAD_BYTES.min(available)];
        let got = self
            .storage
            .read_at(lsn.0, &mut bytes)
            .map_err(|e| WalError::io("reading the log", e))?;
        bytes.truncate(got);
        if let FrameCheck::Incomplete(needed) = check_frame(&bytes) {
            if needed <= available && needed > bytes.len() {
                bytes.resize(needed, 0);
                let got = self
                    .storage
                    .read_at(lsn.0, &mut bytes)
                    .map_err(|e| WalError::io("reading the log", e))?;
                bytes.truncate(got);
            }
        }
        LogRecord::decode(&bytes, lsn)
    }

    // -----------------------------------------------------------------------------------------
    // Checkpoints

    /// Records that the checkpoint beginning at `begin` is complete (its `CheckpointEnd` is
    /// appended). The log is first synced to its end, then the master record is replaced
    /// durably (the log's start unchanged), so the master never names a checkpoint a crash
    /// could lose. A `NoForce` log does so too (commits are never forced, but a checkpoint,
    /// every few MiB of log, is): it lets the log be discarded behind it. In `LsnOnly` mode
    /// there are no records, and the checkpoint is kept in memory only.
    pub fn set_checkpoint(&self, begin: Lsn) -> WalResult<()> {
        self.complete_checkpoint(begin, Lsn::NONE).map(|_| ())
    }

    /// Discards every record below `lsn`, which must be a record's LSN no later than the last
    /// complete checkpoint's begin: the oldest LSN that recovery (from that checkpoint) and
    /// the rollback of every running transaction still need. First the master record names
    /// `lsn` as the log's start, durably; then the storage may free the bytes below it
    /// ([`LogStorage::discard`]). Returns the start, which only grows (a smaller `lsn` is a
    /// no-op).
    ///
    /// An `LsnOnly` log (no records) discards nothing: a no-op.
    pub fn discard_before(&self, lsn: Lsn) -> WalResult<Lsn> {
        let mut master = self.master.lock();
        let checkpoint = master.checkpoint;
        self.move_master(&mut master, checkpoint, lsn)
    }

    /// [`LogManager::set_checkpoint`] and [`LogManager::discard_before`] in one master-record
    /// write (one file sync, rename and directory sync instead of two): what a checkpoint
    /// calls. `discard_before` may be [`Lsn::NONE`] (nothing to discard). Returns the start.
    pub fn complete_checkpoint(&self, begin: Lsn, discard_before: Lsn) -> WalResult<Lsn> {
        let mut master = self.master.lock();
        if self.mode == LogMode::LsnOnly {
            master.checkpoint = Some(begin);
            return Ok(master.start);
        }
        let end = self.end_lsn();
        if begin < master.start || begin >= end {
            return Err(WalError::OutOfRange {
                lsn: begin,
                first: master.start,
                end,
            });
        }
        self.flush_until(Lsn(end.0 - 1), true, false)?;
        self.move_master(&mut master, Some(begin), discard_before)
    }

    /// Replaces the master record by one naming `checkpoint` and the start `max(start, lsn)`,
    /// then frees the bytes below a start that moved. The caller holds the master latch and has
    /// synced the log past `checkpoint`'s begin.
    fn move_master(
        &self,
        master: &mut Master,
        checkpoint: Option<Lsn>,
        lsn: Lsn,
    ) -> WalResult<Lsn> {
        let moves = self.mode != LogMode::LsnOnly && lsn > master.start;
        if moves {
            match checkpoint {
                Some(c) if lsn <= c => {}
                checkpoint => return Err(WalError::DiscardPastCheckpoint { lsn, checkpoint }),
            }
            // A start that is not a record's LSN would make every later open fail; a
            // checkpoint's begin is synced, so anything below it reads back from storage.
            self.read_frame(lsn)?;
        } else if checkpoint == master.checkpoint {
            return Ok(master.start);
        }
        let next = Master {
            checkpoint,
            start: if moves { lsn } else { master.start },
        };
        if self.mode != LogMode::LsnOnly {
            self.storage
                .write_master(&encode_master(next))
                .map_err(|e| WalError::io("writing the master record", e))?;
        }
        *master = next;
        if moves {
            self.start.store(lsn.0, Ordering::Release);
            self.storage
                .discard(LOG_HEADER_SIZE as u64..lsn.0)
                .map_err(|e| WalError::io("freeing discarded log bytes", e))?;
        }
        Ok(master.start)
    }

    /// Where the last complete checkpoint begins, if one was taken.
    pub fn last_checkpoint(&self) -> Option<Lsn> {
        self.master.lock().checkpoint
    }

    /// Bytes of disk (a file's allocated blocks) or memory the log's storage holds now, where
    /// it can tell: less than the log's length once a discard freed some.
    pub fn held_bytes(&self) -> WalResult<Option<u64>> {
        self.storage
            .held_bytes()
            .map_err(|e| WalError::io("measuring the log", e))
    }

    // -----------------------------------------------------------------------------------------
    // Introspection

    pub fn stats(&self) -> LogStats {
        let start = self.first_lsn();
        let end = match self.mode {
            LogMode::LsnOnly => self.opened_end,
            _ => {
                let _buffer = self.buffer.lock();
                self.tail.end()
            }
        };
        let (records, bytes, commits) = (
            self.copies.records(),
            end - self.opened_end,
            self.copies.commits(),
        );
        LogStats {
            start,
            discarded_bytes: start.0 - LOG_HEADER_SIZE as u64,
            live_bytes: end.saturating_sub(start.0),
            records,
            bytes,
            padding_bytes: self.copies.padding(),
            unused_run_bytes: self.copies.unused_in_runs(),
            commits,
            writes: self.writes.load(Ordering::Relaxed),
            syncs: self.syncs.load(Ordering::Relaxed),
            commit_batches: self.commit_batches.load(Ordering::Relaxed),
            gathers: self.gathers.load(Ordering::Relaxed),
            gather_ns: self.gather_ns.load(Ordering::Relaxed),
        }
    }

    /// Checks the log's invariants; panics on a violation. For tests and stress runs.
    pub fn check_invariants(&self) {
        // The master latch comes first in the latch order (`set_checkpoint` flushes).
        let master = *self.master.lock();
        let guard = self.lock_writer();
        let writer = guard.guard.as_ref().expect("held until dropped");
        let buffer = self.seal();
        let first = LOG_HEADER_SIZE as u64;
        let synced = self.synced.load(Ordering::Acquire);
        let written = self.written.load(Ordering::Acquire);
        let failed = self.failed.load(Ordering::Acquire);
        assert!(first <= synced, "synced end {synced} inside the header");
        assert!(synced <= written, "synced {synced} past written {written}");
        assert!(
            written <= buffer.base,
            "written {written} past the buffer base {}",
            buffer.base
        );
        if writer.pending.is_empty() {
            assert_eq!(written, buffer.base, "bytes taken but never written");
        } else {
            // Only a failed write leaves its bytes behind.
            assert!(failed, "pending bytes outside a write");
            assert_eq!(written, writer.pending_base);
            assert_eq!(
                writer.pending_base + writer.pending.len() as u64,
                buffer.base
            );
        }
        buffer.check_invariants();
        let commits = self.copies.commits();
        let buffered_commits: u64 = self.copies.commits_buffered();
        assert!(
            buffered_commits <= commits,
            "more commits buffered than appended"
        );
        if self.mode == LogMode::LsnOnly {
            assert!(buffer.bytes.is_empty() && self.copies.records() == 0);
            assert!(self.next_lsn.load(Ordering::Relaxed) >= buffer.base);
        }
        if let Some(begin) = master.checkpoint {
            assert!(begin.0 >= first, "checkpoint {begin} inside the header");
            assert!(begin >= master.start, "checkpoint {begin} below the start");
        }
        assert!(
            master.start.0 >= first,
            "start {} inside the header",
            master.start
        );
        assert_eq!(master.start.0, self.start.load(Ordering::Acquire));
        if master.start.0 > first {
            assert_eq!(
                self.mode,
                LogMode::Durable,
                "a discard outside durable mode"
            );
            // (An open that accepted the loss of the checkpoint, and of every record from the
            // start on, leaves no checkpoint and a start at the synced end.)
            assert!(
                master.start.0 <= synced,
                "start {} past the synced end",
                master.start
            );
        }
        assert!(self.commit_batches.load(Ordering::Relaxed) <= self.syncs.load(Ordering::Relaxed));
    }
}

impl Drop for LogManager {
    /// A clean shutdown writes (and in `Durable` mode syncs) what is still buffered.
    fn drop(&mut self) {
        if self.mode == LogMode::LsnOnly || self.failed.load(Ordering::Acquire) {
            return;
        }
        let _ = self.flush_to(Lsn(u64::MAX));
    }
}

impl PageLog for LogManager {
    fn log_redo(&self, pages: &[PageRedo<'_>]) -> Lsn {
        self.append_encoded(&PageRedoView(pages), false, None)
    }

    fn log_page_redo(
        &self,
        page: PageId,
        zeroed: bool,
        image: &[u8],
        ranges: &[(u32, u32)],
    ) -> Lsn {
        let view = PageRangesView {
            page,
            zeroed,
            image,
            ranges,
        };
        // A fresh page's image holds LSN 0, not the LSN its earlier life left on disk, which
        // recovery compares: its record comes from the tail, above every LSN handed out.
        let run = (!zeroed).then(|| storage::page::page_lsn(image));
        self.append_encoded_run(&view, false, None, run)
    }

    fn flush_to(&self, lsn: Lsn) -> StorageResult<()> {
        LogManager::flush_to(self, lsn).map_err(Into::into)
    }
}

/// Judges the bad frame at `bad` (the scan's end, below the log's length `len`): damage in
/// the middle of the log, or a torn tail that a crash explains.
///
/// A crash leaves a torn tail, never intact records after a bad one, with one exception. A
/// process crash (`SIGKILL`) keeps every byte `write` was given, and the log is written
/// front to back by one writer at a time (the group-commit leader, a buffer in one or more
/// `pwrite`s): the file is always a prefix of the log, plus at most part of a frame. Zeros past
/// the last frame (a file system that extended the file first, or preallocated it) and a
/// shortened file are the same. A power loss may also lose any part of the *unsynced* tail
/// while keeping later parts (the page cache writes pages back in any order): there whole
/// sectors read as zeros, then intact frames follow. No commit in them was acknowledged
/// (`Durable` commits wait for the sync) and none was promised (`NoForce`), so that tail is
/// cut quietly too. Anything else is damage: intact records after a bad frame with no zeroed
/// sector between them, or after one the master record shows was synced (the log is synced
/// past a checkpoint's records before the master names it). A log discarded behind
/// checkpoints is scanned from its start, so the hole below it is never judged.
fn damage_at(
    storage: &dyn LogStorage,
    bad: u64,
    len: u64,
    reason: &'static str,
    checkpoint: Option<Lsn>,
) -> WalResult<Option<LogDamage>> {
    let io = |e| WalError::io("looking past a bad log record", e);
    let Some(past) = look_past(storage, bad, len, checkpoint).map_err(io)? else {
        return Ok(None);
    };
    if !past.checkpoint_seen && unwritten_sector_in(storage, bad, past.resumes_at).map_err(io)? {
        return Ok(None);
    }
    Ok(Some(LogDamage {
        lsn: Lsn(bad),
        reason,
        bytes: len - bad,
        records: past.records,
    }))
}

fn log_header() -> [u8; LOG_HEADER_SIZE] {
    let mut header = [0u8; LOG_HEADER_SIZE];
    header[..8].copy_from_slice(&LOG_MAGIC);
    header[8..12].copy_from_slice(&LOG_VERSION.to_le_bytes());
    let crc = crc32c(&header[..12]);
    header[12..16].copy_from_slice(&crc.to_le_bytes());
    header
}

fn encode_master(master: Master) -> [u8; MASTER_SIZE] {
    let mut bytes = [0u8; MASTER_SIZE];
    bytes[..4].copy_from_slice(&MASTER_MAGIC);
    bytes[4..8].copy_from_slice(&MASTER_VERSION.to_le_bytes());
    let checkpoint = master.checkpoint.unwrap_or(Lsn::NONE);
    bytes[8..16].copy_from_slice(&checkpoint.0.to_le_bytes());
    bytes[16..24].copy_from_slice(&master.start.0.to_le_bytes());
    let crc = crc32c(&bytes[..24]);
    bytes[24..28].copy_from_slice(&crc.to_le_bytes());
    bytes
}

fn read_master(storage: &dyn LogStorage) -> WalResult<Option<Master>> {
    let bytes = storage
        .read_master()
        .map_err(|e| WalError::io("reading the master record", e))?;
    bytes.map(|b| decode_master(&b)).transpose()
}

/// Decodes a master record; the version is checked before the size, so a master of another
/// version is reported as such (version 2's was 20 bytes), never as damaged.
pub(crate) fn decode_master(bytes: &[u8]) -> WalResult<Master> {
    if bytes.len() < 8 || bytes[..4] != MASTER_MAGIC {
        return Err(WalError::BadHeader(
            "master record is too short or has the wrong magic",
        ));
    }
    let version = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
    if version != MASTER_VERSION && version != LOG_VERSION {
        return Err(WalError::UnsupportedVersion {
            what: "master record",
            found: version,
            supported: MASTER_VERSION,
        });
    }
    if bytes.len() != MASTER_SIZE {
        return Err(WalError::BadHeader("master record has the wrong size"));
    }
    let stored = u32::from_le_bytes([bytes[24], bytes[25], bytes[26], bytes[27]]);
    if crc32c(&bytes[..24]) != stored {
        return Err(WalError::BadHeader("master record checksum is wrong"));
    }
    let field = |at: usize| {
        let mut lsn = [0u8; 8];
        lsn.copy_from_slice(&bytes[at..at + 8]);
        Lsn(u64::from_le_bytes(lsn))
    };
    let (checkpoint, start) = (field(8), field(16));
    let first = Lsn(LOG_HEADER_SIZE as u64);
    if start < first || (checkpoint != Lsn::NONE && checkpoint < start) {
        return Err(WalError::BadHeader(
            "master record names a start inside the header or past its checkpoint",
        ));
    }
    // A start past the header with no checkpoint is written only by an open that accepted the
    // loss of a damaged log's checkpoint; recovery then scans from the start.
    Ok(Master {
        checkpoint: (checkpoint != Lsn::NONE).then_some(checkpoint),
        start,
    })
}
