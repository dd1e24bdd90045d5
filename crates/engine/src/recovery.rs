//! ARIES recovery and checkpoints.
//!
//! ```text
//!   open ─► analysis (from the last checkpoint: transaction table, dirty page table)
//!        ─► redo     (from the smallest rec_lsn: repeat history, page by page, where page_lsn < lsn)
//!        ─► [tables opened from the catalog]
//!        ─► undo     (losers, newest record first, logical undo + compensation records, End)
//!        ─► checkpoint
//! ```
//!
//! Redo is physical (byte ranges of pages, logged by the buffer pool); undo is logical (see
//! `undo.rs`), so it stays correct when a page split moved a record's index entry since.
//! A compensation record's undo-next skips what was already undone, so a crash during undo
//! never undoes twice.
//!
//! Checkpoints are fuzzy: `CheckpointBegin`, then the active transactions and the dirty pages
//! with their rec_lsn, then `CheckpointEnd`, then the master record. Then the log below the
//! oldest LSN still needed is discarded:
//!
//! ```text
//!   oldest = min( checkpoint begin,                        analysis starts here
//!                 min rec_lsn of the dirty page table,     redo starts here
//!                 min first LSN of running transactions )  undo (or a rollback) reads back to here
//! ```
//!
//! Before its begin record a fuzzy checkpoint writes back the pages whose rec_lsn is older
//! than the previous checkpoint's begin, so hot pages (written only on eviction) cannot hold
//! `oldest` back: the log keeps about two checkpoint intervals, more only while a transaction
//! runs across them. Recovery never reads below the start: a read there is
//! `WalError::Discarded`, an error (a bug in this computation), never zeros. The active-transaction
//! table's latch is held exclusively while the checkpoint appends its begin record and reads
//! the table, and shared by a committing transaction while it appends its commit record, so a
//! transaction is either listed as running or has its commit after the checkpoint's begin.
//! The table is read *after* the begin is appended, and a transaction's other records publish
//! their LSN into its last-LSN cell under the log buffer latch
//! (`LogManager::append_update_publishing`), so a record before the begin is always in the last
//! LSN the checkpoint lists. (Before, the cell was stored after the append returned and the
//! table read before the begin: a record could fall in between, and a crash then left it
//! neither in the analysis scan nor on the undo chain.)

use std::collections::{BinaryHeap, HashMap};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use storage::page::OFFSET_LSN;
use storage::{Lsn, PageId};
use wal::{ActiveTxn as LoggedTxn, LogRecord, LogStorage, PageRedoOwned, TxnId};

use crate::api::{TxError, TxResult};
use crate::db::{Database, RunningTxn};
use crate::undo;

/// Transactions that were running at the crash, with the LSN of their last record.
#[derive(Default, Debug)]
pub struct Losers(pub Vec<(TxnId, Lsn)>);

/// What the recovery of an open did ([`Database::recovery`]): how much log it read, how many
/// logged page changes it found missing from the page file and redid, how many it found there
/// already, and what it rolled back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RecoveryReport {
    /// Log records the analysis pass read, from the last checkpoint's begin.
    pub analysed: u64,
    /// Page changes the redo pass applied: the page on disk was older than the change.
    pub redone: u64,
    /// Page changes the redo pass found on disk already (the page was written after them;
    /// a loser's among them were stolen: written before its commit).
    pub on_disk: u64,
    /// Transactions unfinished at the crash, rolled back by the undo pass.
    pub losers: u64,
    /// Changes the undo pass rolled back (each logged with a compensation record).
    pub undone: u64,
    /// Pages whose write the crash tore, rebuilt from the log by the redo pass and checked
    /// against the checksum in their header (see `Torn`).
    pub torn_rebuilt: u64,
    /// Pages put back from the doublewrite file before recovery began
    /// (`storage::doublewrite::restore`): torn in the page file, or left older there by a
    /// crash before their batch reached it.
    pub doublewrite_restored: u64,
    /// Of those, the pages that were torn in the page file.
    pub doublewrite_torn: u64,
    /// Microseconds the open spent putting pages back from the doublewrite file (reading
    /// the batches the page file had not synced, and those pages in the page file).
    pub doublewrite_us: u64,
    /// Microseconds of the analysis pass (reading the log from the last checkpoint's begin).
    pub analysis_us: u64,
    /// Microseconds of the redo pass (reading the log from the oldest dirty page's change
    /// and the pages it names).
    pub redo_us: u64,
    /// Microseconds of the undo pass.
    pub undo_us: u64,
    /// Pages the checkpoint that ends the open wrote back (those redo and undo dirtied).
    pub checkpoint_pages: u64,
    /// Microseconds of that checkpoint: the pages written back and synced, the log forced and
    /// the master record replaced.
    pub checkpoint_us: u64,
    /// Heap files whose free-space map the open took from the map the checkpoint it recovered
    /// from saved (`storage::heap::saved`), reading only the pages changed or added since.
    pub heaps_saved: u64,
    /// Heap files whose free-space map the open rebuilt by reading every page of the chain
    /// (no saved map of that checkpoint, or none of the file).
    pub heaps_walked: u64,
    /// Heap pages the open read for the free-space maps, both ways.
    pub heap_pages_read: u64,
    /// Microseconds the open spent on the free-space maps (not part of [`RecoveryReport::total_us`]:
    /// an open without recovery builds them too).
    pub free_space_us: u64,
}

impl RecoveryReport {
    /// Microseconds the whole recovery took: the doublewrite file's pages put back, the
    /// three passes and the checkpoint that ends them.
    pub fn total_us(&self) -> u64 {
        self.doublewrite_us + self.analysis_us + self.redo_us + self.undo_us + self.checkpoint_us
    }
}

/// `us` microseconds as milliseconds, one decimal.
fn ms(us: u64) -> String {
    format!("{:.1} ms", us as f64 / 1000.0)
}

impl std::fmt::Display for RecoveryReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} log records analysed; {} page changes redone, {} found on disk already; \
             {} unfinished transaction{} rolled back ({} changes undone); {} torn page{} \
             rebuilt from the log; {} page{} put back from the doublewrite file ({} of them \
             torn); in {}: doublewrite file {}, analysis {}, redo {}, undo {}, checkpoint {} \
             ({} page{} written back); free-space maps of {} heap{} taken as saved at the \
             checkpoint, {} rebuilt, {} heap page{} read, in {}",
            self.analysed,
            self.redone,
            self.on_disk,
            self.losers,
            if self.losers == 1 { "" } else { "s" },
            self.undone,
            self.torn_rebuilt,
            if self.torn_rebuilt == 1 { "" } else { "s" },
            self.doublewrite_restored,
            if self.doublewrite_restored == 1 {
                ""
            } else {
                "s"
            },
            self.doublewrite_torn,
            ms(self.total_us()),
            ms(self.doublewrite_us),
            ms(self.analysis_us),
            ms(self.redo_us),
            ms(self.undo_us),
            ms(self.checkpoint_us),
            self.checkpoint_pages,
            if self.checkpoint_pages == 1 { "" } else { "s" },
            self.heaps_saved,
            if self.heaps_saved == 1 { "" } else { "s" },
            self.heaps_walked,
            self.heap_pages_read,
            if self.heap_pages_read == 1 { "" } else { "s" },
            ms(self.free_space_us),
        )
    }
}

/// A log error met by recovery or a checkpoint. Only I/O errors keep their own action: the
/// others (a record that is corrupt, or discarded while still needed) name the log's work.
fn wal_err(e: wal::WalError) -> TxError {
    match e {
        e @ wal::WalError::Io { .. } => TxError::Storage(e.into()),
        other => TxError::Storage(storage::StorageError::Io {
            action: "recovering from or checkpointing the log",
            source: io::Error::other(other),
        }),
    }
}

/// The analysis pass's state: what it has learned from the log scanned so far, from the last
/// checkpoint's begin on.
#[derive(Default, Debug)]
struct Analysis {
    /// Transactions not known to have ended: (last LSN, committed).
    txns: HashMap<TxnId, (Lsn, bool)>,
    /// Transactions whose `End` the scan has passed: a checkpoint's list, read before that
    /// `End` but logged after it, must not bring them back as losers.
    ended: std::collections::HashSet<TxnId>,
    /// Dirty pages and their recovery LSN (the earliest change redo must start from).
    dirty: HashMap<PageId, Lsn>,
    max_txn: u64,
    /// Pages the checkpoints' ends list as retired or free for reuse (see [`CheckpointMeta`]).
    reusable: Vec<PageId>,
}

impl Analysis {
    /// Takes one record into account.
    ///
    /// The scan starts at a checkpoint's begin, but the checkpoint's tables are logged in its
    /// `CheckpointEnd`, with other transactions' records in between. They describe the state
    /// *at the begin*, so they are merged under what the scan saw since: a page's recovery LSN
    /// is the earlier of the two (a page dirtied before the begin and changed again before the
    /// end record must be redone from its first change, not from the change the scan met first:
    /// taking the scan's made redo skip a new page's format record, and a crash test's
    /// reopen fail on a page of zeroes); a transaction the scan already knows keeps its later
    /// last LSN (and a commit it saw); one the scan saw end is not listed again.
    fn record(&mut self, lsn: Lsn, rec: LogRecord) {
        if let Some(t) = rec.txn() {
            self.max_txn = self.max_txn.max(t.0);
        }
        match rec {
            LogRecord::CheckpointEnd {
                active,
                dirty: pages,
                meta,
                ..
            } => {
                for a in active {
                    self.max_txn = self.max_txn.max(a.txn.0);
                    // A transaction that had logged nothing by the checkpoint's begin has
                    // nothing before it to undo (its later records, if any, are in the scan).
                    // Checkpoints no longer list such transactions, but logs written before
                    // that list read-only ones this way, and undoing one read "LSN 0".
                    if self.ended.contains(&a.txn) || a.last_lsn == Lsn::NONE {
                        continue;
                    }
                    let e = self.txns.entry(a.txn).or_insert((a.last_lsn, a.committed));
                    e.1 |= a.committed;
                }
                for (p, l) in pages {
                    self.dirty
                        .entry(p)
                        .and_modify(|rec_lsn| *rec_lsn = (*rec_lsn).min(l))
                        .or_insert(l);
                }
                // Engine bytes this build cannot read are left alone: they only ever speed
                // things up (a higher next id; pages to reuse).
                if let Ok(meta) = CheckpointMeta::decode(&meta) {
                    self.max_txn = self.max_txn.max(meta.next_txn);
                    self.reusable.extend(meta.reusable);
                }
            }
            LogRecord::PageRedo { pages } => {
                for p in pages {
                    self.dirty.entry(p.page).or_insert(lsn);
                }
            }
            LogRecord::Update { txn, .. }
            | LogRecord::Compensation { txn, .. }
            | LogRecord::Abort { txn, .. } => {
                let e = self.txns.entry(txn).or_insert((lsn, false));
                e.0 = lsn;
            }
            LogRecord::Commit { txn, .. } => {
                self.txns.insert(txn, (lsn, true));
            }
            LogRecord::End { txn, .. } => {
                self.txns.remove(&txn);
                self.ended.insert(txn);
            }
            // The log's iterators skip padding; nothing to note if one came through.
            LogRecord::CheckpointBegin | LogRecord::Padding { .. } => {}
        }
    }
}

/// The engine's bytes in a `CheckpointEnd` record (its `meta`): the transaction ids handed
/// out so far, then the pages retired or free for reuse at the checkpoint
/// (`BufferPool::reusable_pages`), so that the open after a restart can hand out again the
/// unlinked leaves no structure reaches.
///
/// ```text
///   next_txn u64 | count u64 | count × page id u64        (all little-endian)
/// ```
///
/// Logs written before the list was kept have the first field alone (8 bytes).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckpointMeta {
    /// No transaction id below it was handed out before the checkpoint.
    pub next_txn: u64,
    /// Pages taken out of every structure and not yet allocated again.
    pub reusable: Vec<PageId>,
}

impl CheckpointMeta {
    /// The most pages a checkpoint lists (8 MiB of log): pages beyond stay unlinked leaves
    /// after a restart, as every one did before the list was kept.
    pub const MAX_PAGES: usize = 1 << 20;

    pub fn encode(&self) -> Vec<u8> {
        let pages = &self.reusable[..self.reusable.len().min(Self::MAX_PAGES)];
        let mut out = Vec::with_capacity(16 + 8 * pages.len());
        out.extend_from_slice(&self.next_txn.to_le_bytes());
        out.extend_from_slice(&(pages.len() as u64).to_le_bytes());
        for p in pages {
            out.extend_from_slice(&p.0.to_le_bytes());
        }
        out
    }

    /// Reads what [`CheckpointMeta::encode`] wrote (or the 8 bytes of an older log); an error
    /// names what does not fit.
    pub fn decode(bytes: &[u8]) -> Result<CheckpointMeta, &'static str> {
        let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
        match bytes.len() {
            0..=7 => return Err("checkpoint meta shorter than its transaction id"),
            8 => {
                return Ok(CheckpointMeta {
                    next_txn: word(0),
                    reusable: Vec::new(),
                })
            }
            9..=15 => return Err("checkpoint meta's page count is cut short"),
            _ => {}
        }
        let count = word(8);
        if count > Self::MAX_PAGES as u64 || (bytes.len() - 16) as u64 != count * 8 {
            return Err("checkpoint meta's page count does not match its length");
        }
        Ok(CheckpointMeta {
            next_txn: word(0),
            reusable: (0..count as usize)
                .map(|i| PageId(word(16 + 8 * i)))
                .collect(),
        })
    }
}

/// What the analysis and redo passes leave for the rest of the open.
#[derive(Default, Debug)]
pub(crate) struct Redone {
    /// Transactions to roll back.
    pub losers: Losers,
    /// Pages that may be unlinked leaves to hand out again: those the last checkpoint listed,
    /// and those redo found marked unlinked at some record (the leaves unlinked since the
    /// checkpoint's begin among them). Only a candidate list, with repeats:
    /// `storage::btree::unlinked_leaves` says which are.
    pub reuse_candidates: Vec<PageId>,
    /// The begin of the checkpoint analysis started from, if there was one.
    pub checkpoint: Option<Lsn>,
    /// Every page the log may have changed since that begin: the analysis pass's dirty page
    /// table (a saved free-space map is exact for every other page).
    pub changed: std::collections::HashSet<PageId>,
}

/// Analysis and redo passes. Needs the pool and the log (a database on disk with logging).
pub(crate) fn analyze_and_redo(db: &Database, report: &mut RecoveryReport) -> TxResult<Redone> {
    let (Some(log), Some(pool)) = (db.log.as_ref(), db.pool.as_ref()) else {
        return Ok(Redone::default());
    };
    let began = Instant::now();
    let checkpoint = log.last_checkpoint();
    let start = checkpoint.unwrap_or_else(|| log.first_lsn());
    let mut analysis = Analysis::default();
    for item in log.iter_from(start) {
        let (lsn, rec) = item.map_err(wal_err)?;
        analysis.record(lsn, rec);
        report.analysed += 1;
    }
    report.analysis_us = began.elapsed().as_micros() as u64;
    let Analysis {
        txns,
        dirty,
        max_txn,
        mut reusable,
        ..
    } = analysis;
    db.next_txn.start_after(max_txn);

    // Pages that failed their checksum when redo first read them, being rebuilt from the
    // log (see `Damaged`).
    let mut damaged: HashMap<PageId, Damaged> = HashMap::new();
    if let Some(redo_start) = dirty.values().min().copied() {
        // The pages redo will read, asked for all at once: a crash leaves them cold, and
        // one read after another would wait for each in turn.
        pool.will_need(&dirty.keys().copied().collect::<Vec<_>>());
        for item in log.iter_from(redo_start) {
            let (lsn, rec) = item.map_err(wal_err)?;
            let LogRecord::PageRedo { pages } = rec else {
                continue;
            };
            for p in pages {
                match dirty.get(&p.page) {
                    Some(rec_lsn) if *rec_lsn <= lsn => {}
                    _ => continue,
                }
                let g = match damaged.get_mut(&p.page) {
                    // A record that sets the whole page (a fresh page, or a full image)
                    // rebuilds a damaged one from here on, whatever it holds.
                    Some(_) if p.zeroed => {
                        damaged.remove(&p.page);
                        report.torn_rebuilt += 1;
                        report.redone += 1;
                        let mut g = pool.fix_unread_for_redo(p.page)?;
                        redo_into(&mut g, &p, lsn)?;
                        g
                    }
                    Some(Damaged::Waiting { skipped, .. }) => {
                        *skipped += 1;
                        continue;
                    }
                    Some(Damaged::Torn(t)) => {
                        report.redone += 1;
                        match t.replay(&p, lsn)? {
                            Rebuild::Pending => continue,
                            Rebuild::Failed(reason) => {
                                damaged.insert(p.page, Damaged::waiting(reason, lsn, 0));
                                continue;
                            }
                            Rebuild::Done => {
                                let image = std::mem::take(&mut t.image);
                                damaged.remove(&p.page);
                                report.torn_rebuilt += 1;
                                install(pool, p.page, &image, lsn)?
                            }
                        }
                    }
                    None => match pool.fix_for_redo(p.page) {
                        Ok(mut g) => {
                            if g.lsn() >= lsn {
                                report.on_disk += 1;
                            } else {
                                report.redone += 1;
                                redo_into(&mut g, &p, lsn)?;
                            }
                            g
                        }
                        Err(storage::StorageError::Corruption { .. }) if p.zeroed => {
                            report.torn_rebuilt += 1;
                            report.redone += 1;
                            let mut g = pool.fix_unread_for_redo(p.page)?;
                            redo_into(&mut g, &p, lsn)?;
                            g
                        }
                        Err(storage::StorageError::Corruption { reason, .. }) => {
                            let Some((image, stored)) = pool.read_torn(p.page)? else {
                                damaged.insert(p.page, Damaged::waiting(reason, lsn, 1));
                                continue;
                            };
                            let mut t = Torn::new(image, stored, lsn);
                            report.redone += 1;
                            match t.replay(&p, lsn)? {
                                Rebuild::Pending => {
                                    damaged.insert(p.page, Damaged::Torn(t));
                                    continue;
                                }
                                Rebuild::Failed(reason) => {
                                    damaged.insert(p.page, Damaged::waiting(reason, lsn, 0));
                                    continue;
                                }
                                // The header's LSN is this record's.
                                Rebuild::Done => {
                                    report.torn_rebuilt += 1;
                                    install(pool, p.page, &t.image, lsn)?
                                }
                            }
                        }
                        Err(e) => return Err(e.into()),
                    },
                };
                // A leaf unlinked since the checkpoint (or on disk so already): a candidate
                // for reuse, confirmed once redo is done (a later record may reuse it).
                if storage::btree::node::looks_unlinked(&g) {
                    reusable.push(p.page);
                }
            }
        }
    }
    if let Some((&page, d)) = damaged.iter().min_by_key(|(page, _)| **page) {
        let reason = match d {
            Damaged::Torn(t) => t.not_rebuilt(None),
            Damaged::Waiting {
                reason,
                from,
                skipped,
            } => format!(
                "{reason}; and the log holds no image of the whole page from {from} on to \
                 rebuild it from ({skipped} later change{} to it skipped)",
                if *skipped == 1 { "" } else { "s" }
            ),
        };
        return Err(storage::StorageError::Corruption { page, reason }.into());
    }
    let losers: Vec<_> = txns
        .into_iter()
        .filter(|(_, (_, committed))| !committed)
        .map(|(t, (lsn, _))| (t, lsn))
        .collect();
    report.losers = losers.len() as u64;
    Ok(Redone {
        losers: Losers(losers),
        reuse_candidates: reusable,
        checkpoint,
        changed: dirty.into_keys().collect(),
    })
}

/// A page that failed its checksum when redo first read it: most likely a write the crash
/// tore, which redo rebuilds from the log in one of two ways, or else refuses to open.
///
/// * **From a whole image.** A record that sets the whole page ("zeroed", then its bytes: a
///   fresh page, or a full-page image, see `storage::BufferPool::set_full_page_images`)
///   determines the page from there on, whatever the disk holds. With full-page images on,
///   every stretch in which a page is dirty starts with one, so a tear of any shape (a power
///   loss keeps any of a write's sectors) is rebuilt; the records before the image are
///   skipped.
/// * **A torn write whose header is new** (`Torn`), without an image.
///
/// A page still damaged when redo ends fails the open, naming it.
#[derive(Debug)]
enum Damaged {
    /// Its header is right: being replayed onto as it was read, checked at its header's LSN.
    Torn(Torn),
    /// Waiting for a record that sets the whole page: its header is wrong too, or the replay
    /// failed its check (`reason`, from the record at `from` on; `skipped` changes since).
    Waiting {
        reason: String,
        from: Lsn,
        skipped: u64,
    },
}

/// A page whose checksum alone is wrong: perhaps a torn write whose first part, the header,
/// is new. A process killed inside `pwrite` leaves the part of the page the kernel had copied
/// (whole memory pages, from the start) and the older bytes after it, so the header is the
/// new image's, with that image's LSN and checksum. Redo is physical (byte ranges), so
/// replaying every logged change of the page from its recovery LSN on, whatever the LSN in
/// its header, rebuilds each part of it: a byte's last change is in the log, and a byte that
/// no change touched has been the same since the page was last written whole. The rebuild
/// is checked, not assumed: once the replay reaches the LSN in the header, the page must have
/// exactly the checksum stored in it (damage, or a tear that left the header old, fails
/// this). Replay goes on from there as for any page.
#[derive(Debug)]
struct Torn {
    /// The page as read, and the changes replayed onto it so far (kept out of the pool,
    /// which could write it back, until it is proved right).
    image: Vec<u8>,
    /// The checksum and LSN in the page's header.
    stored: u32,
    written: Lsn,
    /// The first change replayed, and how many so far.
    from: Lsn,
    changes: u64,
}

/// Where the rebuild of a [`Torn`] page stands after a change.
enum Rebuild {
    Pending,
    Done,
    /// Why the page is not what its header says.
    Failed(String),
}

impl Torn {
    /// The page read as `image`, whose header holds checksum `stored`; its first change to
    /// replay is at `from`.
    fn new(image: Vec<u8>, stored: u32, from: Lsn) -> Torn {
        let written = storage::page::page_lsn(&image);
        Torn {
            image,
            stored,
            written,
            from,
            changes: 0,
        }
    }

    /// Replays the change `p` at `lsn` onto the image: done once the page is the image its
    /// header names, checksum and all; failed if the replay went past that LSN, or reached it
    /// with another image.
    fn replay(&mut self, p: &PageRedoOwned, lsn: Lsn) -> TxResult<Rebuild> {
        check_ranges(p, self.image.len(), lsn)?;
        if p.zeroed {
            self.image.fill(0);
        }
        for (offset, bytes) in &p.ranges {
            let at = *offset as usize;
            self.image[at..at + bytes.len()].copy_from_slice(bytes);
        }
        self.image[OFFSET_LSN..OFFSET_LSN + 8].copy_from_slice(&lsn.0.to_le_bytes());
        self.changes += 1;
        Ok(self.check(lsn))
    }

    fn check(&self, lsn: Lsn) -> Rebuild {
        if lsn < self.written {
            return Rebuild::Pending;
        }
        let computed = storage::page::page_checksum(&self.image);
        if lsn == self.written && computed == self.stored {
            return Rebuild::Done;
        }
        Rebuild::Failed(self.not_rebuilt((lsn == self.written).then_some(computed)))
    }

    /// Why the page was not rebuilt; `computed`: the checksum it had at the LSN its header
    /// names, if the replay reached it.
    fn not_rebuilt(&self, computed: Option<u32>) -> String {
        let at = match computed {
            Some(c) => format!("gave checksum {c:#010x}"),
            None => "never reached it".to_string(),
        };
        format!(
            "checksum mismatch (stored {:#010x}), and not a write torn by a crash: replaying \
             its {} logged change{} from {} on to rebuild the image written at {} {at}",
            self.stored,
            self.changes,
            if self.changes == 1 { "" } else { "s" },
            self.from,
            self.written,
        )
    }
}

impl Damaged {
    /// Waiting for a record that sets the whole page, damaged as `reason` says since the
    /// record at `from`, `skipped` changes skipped so far.
    fn waiting(reason: String, from: Lsn, skipped: u64) -> Damaged {
        Damaged::Waiting {
            reason,
            from,
            skipped,
        }
    }
}

/// Puts a torn page proved right (`image`, at `lsn`) into the pool for the rest of redo: only
/// then, since the pool may write it back before redo ends.
fn install<'a>(
    pool: &'a storage::BufferPool,
    page: PageId,
    image: &[u8],
    lsn: Lsn,
) -> TxResult<storage::PageWriteGuard<'a>> {
    let mut g = pool.fix_unread_for_redo(page)?;
    g.page_mut().copy_from_slice(image);
    g.set_lsn(lsn);
    Ok(g)
}

/// A redo record's ranges must lie inside the page.
fn check_ranges(p: &PageRedoOwned, page_len: usize, lsn: Lsn) -> TxResult<()> {
    if p.ranges
        .iter()
        .any(|(offset, bytes)| *offset as usize + bytes.len() > page_len)
    {
        return Err(TxError::Storage(storage::StorageError::Corruption {
            page: p.page,
            reason: format!("redo record at {lsn} writes past the page end"),
        }));
    }
    Ok(())
}

/// Applies the change `p` logged at `lsn` to its page, fixed for redo, and stamps the LSN.
fn redo_into(g: &mut storage::PageWriteGuard<'_>, p: &PageRedoOwned, lsn: Lsn) -> TxResult<()> {
    check_ranges(p, g.len(), lsn)?;
    if p.zeroed {
        // A fresh page (or a full image): logged as "zeroed", then its header and contents.
        g.page_mut().fill(0);
    }
    for (offset, bytes) in &p.ranges {
        g.range_mut(*offset as usize, bytes.len())
            .copy_from_slice(bytes);
    }
    g.set_lsn(lsn);
    Ok(())
}

/// Undo pass: rolls back every loser, newest record first across all of them.
pub(crate) fn undo(db: &Database, losers: Losers, report: &mut RecoveryReport) -> TxResult<()> {
    let Some(log) = db.log.as_ref() else {
        return Ok(());
    };
    let mut last: HashMap<TxnId, Lsn> = losers.0.iter().copied().collect();
    let mut todo: BinaryHeap<(Lsn, TxnId)> = losers.0.iter().map(|(t, l)| (*l, *t)).collect();
    let (mut key, mut rec) = (Vec::new(), Vec::new());
    let end = |txn: TxnId, prev: Lsn| {
        log.append(&LogRecord::End { txn, prev });
    };
    while let Some((lsn, txn)) = todo.pop() {
        let record = log.read(lsn).map_err(wal_err)?;
        let next = match record {
            LogRecord::Update { prev, payload, .. } => {
                let op = undo::decode(&payload)?;
                db.apply_undo(&op, &mut key, &mut rec)?;
                report.undone += 1;
                let l = last.get(&txn).copied().unwrap_or(Lsn::NONE);
                let clr = log.append_compensation(txn, l, prev, &[]);
                last.insert(txn, clr);
                prev
            }
            LogRecord::Compensation { undo_next, .. } => undo_next,
            LogRecord::Abort { prev, .. } | LogRecord::Commit { prev, .. } => prev,
            other => {
                return Err(TxError::Invalid(format!(
                    "recovery: transaction {} chains to a {:?} record at {lsn}",
                    txn.0,
                    other.kind()
                )))
            }
        };
        if next == Lsn::NONE {
            end(txn, last.get(&txn).copied().unwrap_or(lsn));
        } else {
            todo.push((next, txn));
        }
    }
    log.flush_to(log.end_lsn()).map_err(wal_err)?;
    Ok(())
}

/// A checkpoint. With no transaction running (open, close) it is sharp: every dirty page is
/// written first, so the next recovery has nothing to redo. A fuzzy one first writes the pages
/// dirty since before the previous checkpoint's begin (so no page pins the log for more than
/// two checkpoint intervals). Either way, once complete, the log below the oldest LSN still
/// needed is discarded (see [`oldest_needed`]).
pub(crate) fn checkpoint(db: &Database) -> TxResult<()> {
    let Some(log) = db.log.as_ref().filter(|_| db.log_records) else {
        if let Some(pool) = &db.pool {
            pool.flush_all()?;
        }
        return Ok(());
    };
    if let Some(pool) = &db.pool {
        if db.active_transactions().is_empty() {
            log.flush_to(log.end_lsn()).map_err(wal_err)?;
            pool.flush_all()?;
        } else if let Some(previous) = log.last_checkpoint() {
            pool.flush_older_than(previous)?;
        }
    }
    let (begin, active) = db.with_active_exclusive(|| log.append(&LogRecord::CheckpointBegin));
    let dirty = match &db.pool {
        Some(pool) => {
            let dirty = pool.dirty_pages();
            // Pages written back before the table was read are left out of it: make them
            // durable before the checkpoint says recovery need not redo them.
            pool.sync_store()?;
            dirty
        }
        None => Vec::new(),
    };
    // Read after the dirty page table, as the open that takes them assumes.
    db.save_free_space(begin)?;
    let oldest = oldest_needed(begin, &dirty, &active);
    let meta = CheckpointMeta {
        next_txn: db.next_txn.upper_bound(),
        // Read after the begin: a leaf unlinked before it and retired after this read has its
        // unlink logged before the begin too, and is found again only if its page is still
        // dirty (in `dirty`); otherwise it stays an unlinked leaf, as before the list.
        reusable: db
            .pool
            .as_ref()
            .map(|p| p.reusable_pages())
            .unwrap_or_default(),
    };
    log.append(&LogRecord::CheckpointEnd {
        begin,
        // Only transactions that have logged something: one with no record before the begin
        // (a read-only one, or one about to log its first change) has nothing there to undo,
        // and whatever it logs later is in the log recovery scans from the begin.
        active: active
            .into_iter()
            .filter(|a| a.last_lsn != Lsn::NONE)
            .map(|a| LoggedTxn {
                txn: a.txn,
                last_lsn: a.last_lsn,
                committed: a.committed,
            })
            .collect(),
        dirty,
        meta: meta.encode(),
    });
    log.flush_to(log.end_lsn()).map_err(wal_err)?;
    log.complete_checkpoint(begin, oldest).map_err(wal_err)?;
    Ok(())
}

/// The oldest LSN that recovery from the checkpoint beginning at `begin`, or the rollback of a
/// transaction running at it, can read:
///
/// * analysis scans from `begin`;
/// * redo scans from the smallest recovery LSN in the dirty page table, which starts as the
///   checkpoint's `dirty` list (pages dirtied later get recovery LSNs past `begin`);
/// * undo follows each loser's records back to its first, and a transaction running at the
///   checkpoint may become one (or roll back before any crash, reading the same records).
///
/// A transaction's first LSN is taken before its first record is appended, so one that reads
/// as none here appends its first record after `begin`.
pub(crate) fn oldest_needed(begin: Lsn, dirty: &[(PageId, Lsn)], active: &[RunningTxn]) -> Lsn {
    let pages = dirty.iter().map(|(_, rec_lsn)| *rec_lsn);
    let txns = active.iter().map(|a| a.first_lsn);
    pages
        .chain(txns)
        .filter(|lsn| *lsn != Lsn::NONE)
        .fold(begin, Lsn::min)
}

/// Log storage for an in-memory database that is not durable: nothing ever reads the log
/// back (rollback uses the transaction's in-memory undo list, and there is no restart), so
/// only the file header is kept and record bytes are counted and dropped. The log's work of
/// building and buffering records still happens in full.
#[derive(Default)]
pub struct DiscardLogStorage {
    head: parking_lot::Mutex<Vec<u8>>,
    len: AtomicU64,
}

const KEPT: u64 = 4096;

impl LogStorage for DiscardLogStorage {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let head = self.head.lock();
        if offset >= head.len() as u64 {
            return Ok(0);
        }
        let n = buf.len().min(head.len() - offset as usize);
        buf[..n].copy_from_slice(&head[offset as usize..offset as usize + n]);
        Ok(n)
    }

    fn write_at(&self, offset: u64, bytes: &[u8]) -> io::Result<()> {
        if offset < KEPT {
            let mut head = self.head.lock();
            let end = (offset as usize + bytes.len()).min(KEPT as usize);
            if head.len() < end {
                head.resize(end, 0);
            }
            head[offset as usize..end].copy_from_slice(&bytes[..end - offset as usize]);
        }
        self.len
            .fetch_max(offset + bytes.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.len.load(Ordering::Relaxed))
    }

    fn truncate(&self, len: u64) -> io::Result<()> {
        self.head.lock().truncate(len.min(KEPT) as usize);
        self.len.store(len, Ordering::Relaxed);
        Ok(())
    }

    fn read_master(&self) -> io::Result<Option<Vec<u8>>> {
        Ok(None)
    }

    fn write_master(&self, _bytes: &[u8]) -> io::Result<()> {
        Ok(())
    }
}

/// Log storage on an emulated device of its own: each write and each sync waits `delay`,
/// one request at a time (a single disk arm), before the inner storage does it. Reads, the
/// master record and truncation are not delayed: they happen at open and at checkpoints.
pub struct DelayedLogStorage {
    inner: Box<dyn LogStorage>,
    delay: std::time::Duration,
    free_at: parking_lot::Mutex<std::time::Instant>,
    /// Whether the delay applies now (the database's device switch).
    on: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl DelayedLogStorage {
    pub fn new(
        inner: Box<dyn LogStorage>,
        delay: std::time::Duration,
        on: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) -> DelayedLogStorage {
        DelayedLogStorage {
            inner,
            delay,
            free_at: parking_lot::Mutex::new(std::time::Instant::now()),
            on,
        }
    }

    fn wait(&self) {
        if !self.on.load(Ordering::Relaxed) {
            return;
        }
        let done = {
            let mut free_at = self.free_at.lock();
            *free_at = (*free_at).max(std::time::Instant::now()) + self.delay;
            *free_at
        };
        if let Some(left) = done.checked_duration_since(std::time::Instant::now()) {
            std::thread::sleep(left);
        }
    }
}

impl LogStorage for DelayedLogStorage {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read_at(offset, buf)
    }

    fn write_at(&self, offset: u64, bytes: &[u8]) -> io::Result<()> {
        self.wait();
        self.inner.write_at(offset, bytes)
    }

    fn sync(&self) -> io::Result<()> {
        self.wait();
        self.inner.sync()
    }

    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }

    fn truncate(&self, len: u64) -> io::Result<()> {
        self.inner.truncate(len)
    }

    fn read_master(&self) -> io::Result<Option<Vec<u8>>> {
        self.inner.read_master()
    }

    fn write_master(&self, bytes: &[u8]) -> io::Result<()> {
        self.inner.write_master(bytes)
    }

    fn discard(&self, range: std::ops::Range<u64>) -> io::Result<()> {
        self.inner.discard(range)
    }

    fn held_bytes(&self) -> io::Result<Option<u64>> {
        self.inner.held_bytes()
    }
}

#[cfg(test)]
mod tests {
    use wal::PageRedoOwned;

    use super::*;

    #[test]
    fn the_report_gives_each_part_s_time_and_their_sum() {
        let report = RecoveryReport {
            analysed: 10,
            doublewrite_us: 352_040,
            analysis_us: 16_600,
            redo_us: 575_000,
            undo_us: 17_100,
            checkpoint_pages: 1_056,
            checkpoint_us: 210_300,
            heaps_saved: 8,
            heaps_walked: 1,
            heap_pages_read: 240,
            free_space_us: 3_040,
            ..RecoveryReport::default()
        };
        // The free-space maps are the open's, not recovery's: outside the sum.
        assert_eq!(report.total_us(), 1_171_040);
        let line = report.to_string();
        assert!(
            line.ends_with(
                "; in 1171.0 ms: doublewrite file 352.0 ms, analysis 16.6 ms, redo 575.0 ms, \
                 undo 17.1 ms, checkpoint 210.3 ms (1056 pages written back); free-space maps \
                 of 8 heaps taken as saved at the checkpoint, 1 rebuilt, 240 heap pages read, \
                 in 3.0 ms"
            ),
            "{line}"
        );
        assert!(line.starts_with("10 log records analysed;"), "{line}");
    }

    fn redo(page: u64) -> LogRecord {
        LogRecord::PageRedo {
            pages: vec![PageRedoOwned {
                page: PageId(page),
                zeroed: false,
                ranges: vec![(100, vec![1, 2, 3])],
            }],
        }
    }

    fn end(begin: u64, active: Vec<(u64, u64, bool)>, dirty: Vec<(u64, u64)>) -> LogRecord {
        LogRecord::CheckpointEnd {
            begin: Lsn(begin),
            active: active
                .into_iter()
                .map(|(txn, last, committed)| LoggedTxn {
                    txn: TxnId(txn),
                    last_lsn: Lsn(last),
                    committed,
                })
                .collect(),
            dirty: dirty
                .into_iter()
                .map(|(p, l)| (PageId(p), Lsn(l)))
                .collect(),
            meta: Vec::new(),
        }
    }

    #[test]
    fn checkpoint_meta_reads_back_what_it_wrote_and_the_older_form() {
        let meta = CheckpointMeta {
            next_txn: 77,
            reusable: vec![PageId(5), PageId(900), PageId(6)],
        };
        let bytes = meta.encode();
        assert_eq!(bytes.len(), 16 + 3 * 8);
        assert_eq!(CheckpointMeta::decode(&bytes), Ok(meta));
        // A log written before the list: the next transaction id alone.
        assert_eq!(
            CheckpointMeta::decode(&41u64.to_le_bytes()),
            Ok(CheckpointMeta {
                next_txn: 41,
                reusable: vec![]
            })
        );
        for cut in [0, 7, 9, 15, 17, bytes.len() - 1] {
            assert!(
                CheckpointMeta::decode(&bytes[..cut]).is_err(),
                "{cut} bytes"
            );
        }
        let mut longer = bytes.clone();
        longer.extend_from_slice(&[0; 8]);
        assert!(CheckpointMeta::decode(&longer).is_err());
        // A count that would overflow the length check.
        let mut huge = 1u64.to_le_bytes().to_vec();
        huge.extend_from_slice(&(u64::MAX / 4).to_le_bytes());
        assert!(CheckpointMeta::decode(&huge).is_err());
    }

    /// A list longer than a checkpoint keeps is cut, not refused: the rest stay unlinked.
    #[test]
    fn checkpoint_meta_keeps_at_most_its_limit_of_pages() {
        let meta = CheckpointMeta {
            next_txn: 1,
            reusable: (0..CheckpointMeta::MAX_PAGES as u64 + 3)
                .map(PageId)
                .collect(),
        };
        let back = CheckpointMeta::decode(&meta.encode()).unwrap();
        assert_eq!(back.reusable.len(), CheckpointMeta::MAX_PAGES);
        assert_eq!(
            back.reusable[..],
            meta.reusable[..CheckpointMeta::MAX_PAGES]
        );
    }

    /// Every checkpoint end the scan meets adds its pages to the candidates, and its
    /// transaction id still counts.
    #[test]
    fn analysis_gathers_the_pages_checkpoints_list() {
        let with = |next_txn: u64, pages: &[u64]| match end(1000, vec![], vec![]) {
            LogRecord::CheckpointEnd {
                begin,
                active,
                dirty,
                ..
            } => LogRecord::CheckpointEnd {
                begin,
                active,
                dirty,
                meta: CheckpointMeta {
                    next_txn,
                    reusable: pages.iter().copied().map(PageId).collect(),
                }
                .encode(),
            },
            _ => unreachable!(),
        };
        let a = analyse(vec![
            (1000, LogRecord::CheckpointBegin),
            (1100, with(500, &[12, 13])),
            (1200, with(90, &[14])),
        ]);
        assert_eq!(a.reusable, vec![PageId(12), PageId(13), PageId(14)]);
        assert_eq!(a.max_txn, 500);
    }

    fn analyse(records: Vec<(u64, LogRecord)>) -> Analysis {
        let mut a = Analysis::default();
        for (lsn, rec) in records {
            a.record(Lsn(lsn), rec);
        }
        a
    }

    /// A page dirtied before the checkpoint's begin and changed again between begin and end
    /// record: redo starts from the checkpoint's (earlier) recovery LSN, not from the change
    /// the scan met first.
    #[test]
    fn a_checkpoints_earlier_recovery_lsn_wins_over_a_change_logged_after_its_begin() {
        let a = analyse(vec![
            (1000, LogRecord::CheckpointBegin),
            (1100, redo(7)),
            (1200, redo(8)),
            (1300, end(1000, vec![], vec![(7, 500), (9, 600)])),
            (1400, redo(9)),
        ]);
        assert_eq!(a.dirty[&PageId(7)], Lsn(500));
        assert_eq!(
            a.dirty[&PageId(8)],
            Lsn(1200),
            "not in the checkpoint: first change"
        );
        assert_eq!(a.dirty[&PageId(9)], Lsn(600));
    }

    /// Transactions listed as running by a checkpoint: one that ended between begin and end
    /// record stays ended, one that committed stays committed, one with later records keeps
    /// its later last LSN, one with none is a loser from its listed last LSN.
    #[test]
    fn a_checkpoints_transaction_list_does_not_undo_what_the_scan_saw_since_its_begin() {
        let a = analyse(vec![
            (1000, LogRecord::CheckpointBegin),
            (
                1100,
                LogRecord::Abort {
                    txn: TxnId(1),
                    prev: Lsn(900),
                },
            ),
            (
                1150,
                LogRecord::End {
                    txn: TxnId(1),
                    prev: Lsn(1100),
                },
            ),
            (
                1200,
                LogRecord::Commit {
                    txn: TxnId(2),
                    prev: Lsn(950),
                },
            ),
            (
                1250,
                LogRecord::Update {
                    txn: TxnId(3),
                    prev: Lsn(960),
                    payload: vec![],
                },
            ),
            (
                1300,
                end(
                    1000,
                    vec![
                        (1, 900, false),
                        (2, 950, false),
                        (3, 960, false),
                        (4, 970, false),
                    ],
                    vec![],
                ),
            ),
        ]);
        assert!(!a.txns.contains_key(&TxnId(1)), "ended: not a loser again");
        assert_eq!(a.txns[&TxnId(2)], (Lsn(1200), true));
        assert_eq!(a.txns[&TxnId(3)], (Lsn(1250), false));
        assert_eq!(a.txns[&TxnId(4)], (Lsn(970), false));
        assert_eq!(a.max_txn, 4);
    }

    /// A checkpoint (as older builds wrote them) listing a transaction that had logged
    /// nothing: it is no loser, since there is nothing of it to undo; undoing it read LSN 0,
    /// and every later open of the database failed.
    #[test]
    fn a_listed_transaction_that_logged_nothing_is_no_loser() {
        let a = analyse(vec![
            (1000, LogRecord::CheckpointBegin),
            (
                1300,
                end(1000, vec![(7, 0, false), (8, 960, false)], vec![]),
            ),
        ]);
        assert!(
            !a.txns.contains_key(&TxnId(7)),
            "nothing logged: not a loser"
        );
        assert_eq!(a.txns[&TxnId(8)], (Lsn(960), false));
        assert_eq!(a.max_txn, 8, "its id is still never reused");
    }
}
