//! Transactions: the `Tx` operations on tables and indexes, with locking, undo logging,
//! rollback and commit.
//!
//! Order of work inside one write operation (the write-ahead rules the engine keeps):
//!
//! ```text
//!   lock the key (X) ─► log the logical undo record ─► change the record (the buffer pool logs
//!   the physical redo of every page it changes) ─► change the indexes ─► remember the undo
//! ```
//!
//! Logging the undo record *before* the change means recovery always knows how to take back
//! a change that reached the disk; every undo action is idempotent (see `undo.rs`).
//!
//! Reads lock the primary key (S, or X with `for_update`) before looking it up; a lock on a
//! key that does not exist stays held, which protects point lookups against phantoms. Range
//! scans take next-key locks: every key returned and the first key after the range
//! (see `scan_locked`), and inserts lock the key after the one they insert. With record
//! locking on a B+-tree that happens inside the insert's own descent (`insert_entry_locked`,
//! ARIES/IM): the next key's lock is asked for under the leaf latch for an instant only (is
//! it free of scans and deletes? the new entry's own lock guards the rest), and only a
//! refusal makes the insert release its latches, wait for the lock and descend again. A
//! duplicate key then shows up after the record went into the heap, so the insert is undone
//! on the spot (`undo_last`, with a compensation record) before `DuplicateKey` is returned.

use std::mem::ManuallyDrop;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use arrayvec::ArrayVec;

use storage::btree::{InsertOutcome, LeafHint, ScanStep};
use storage::Lsn;
use txn::lock::{KeyRank, LockMode, LockName, TxnLocks, NO_GAP, WHOLE_GAP};
use wal::{LogRecord, TxnId};

use crate::api::{
    Fetch, IndexRef, KeyRange, ReadFn, RowRef, RowWriter, TableRef, Tx, TxError, TxResult, UpdateFn,
};
use crate::db::{ActiveTxn, Database};
use crate::keys::key_hash;
use crate::record::Layout;
use crate::table::{Index, Records, Table};
use crate::undo::{
    push_piece, push_word_piece, UndoList, UndoOp, KIND_DELETE, KIND_INSERT, KIND_UPDATE,
    KIND_UPDATE_PIECES,
};
use crate::value::{Row, Value};

/// Lock name (hashed with the table) standing for the end of an index: what a scan that ran
/// to the end locks, and what an insert after the last key locks.
const END_OF_INDEX: &[u8] = b"\xff\xffEND";

/// Rows one pass of [`Tx::prefetch`] handles: enough for a TPC-C New-Order's reads, few
/// enough that the first loads are still in the cache when the rows are used.
const PREFETCH_BATCH: usize = 32;

/// A scan's low and high bounds: an encoded key and whether (and how) it bounds.
type ScanBounds<'b> = ((&'b [u8], Bound<()>), (&'b [u8], Bound<()>));

/// The floor of every lock a scan takes (see `txn::lock::KeyRank`): its range's low end. The
/// first entry's lock guards the gap below it, which reaches below the range; the keys there
/// are not the scan's to guard. Without record locks (`locking` false) nothing reads it.
fn scan_floor(
    locking: bool,
    key: &crate::keys::KeySpec,
    (lo, bound): (&[u8], Bound<()>),
) -> KeyRank {
    match bound {
        Bound::Included(()) | Bound::Excluded(()) if locking => key.rank(lo),
        _ => WHOLE_GAP,
    }
}

/// The rank of the key an insert adds (its next-key check's `inserting`), where record
/// locks are taken; without them nothing reads it.
fn insert_rank(locking: bool, key: &crate::keys::KeySpec, k: &[u8]) -> KeyRank {
    if locking {
        key.rank(k)
    } else {
        WHOLE_GAP
    }
}

/// Reusable per-session buffers. A thread keeps one and reuses it from transaction to
/// transaction (`Transaction::begin` takes it, `finish` gives it back).
#[derive(Default)]
pub(crate) struct Session {
    undo: UndoList,
    key: Vec<u8>,
    key2: Vec<u8>,
    /// A whole record: what an insert encodes, a copy an update writes its new values into
    /// (see `Staged::rec`), a delete's before image.
    rec: Vec<u8>,
    after: Vec<u8>,
    /// A scan's index entries, and a second collection that checks them (see
    /// `Transaction::collect_locked`).
    hits: Hits,
    hits_again: Hits,
    /// The rows the last scan of a primary index found, kept for the updates and deletes that
    /// follow it (see [`Found`]).
    found: Found,
    /// The rows this transaction read for update by key (see [`Held`]).
    held: Held,
    /// Columns from 64 on that an update set (see `RowWriter`).
    wide: Vec<usize>,
    /// The words a deferred update set, `(byte offset, bytes)` (see `RowWriter`).
    words: Vec<(usize, [u8; 8])>,
    /// The byte spans an update rewrites.
    spans: Vec<(usize, usize)>,
    /// Records deleted by this transaction: their index entries are gone at once, the records
    /// themselves are freed only as it commits (just before the commit record), so no other
    /// transaction reuses their slots while the procedure may still roll back.
    deleted: Vec<(u32, u64)>,
    /// Per index (by lock space) the leaf of this transaction's last insert into it, tried
    /// first by its next insert (see [`LeafHint`]): the lines of one order go to one leaf.
    /// Emptied when a transaction begins, so a hint never outlives its transaction (nor its
    /// database: sessions are kept per thread).
    leaf_hints: ArrayVec<(u32, LeafHint), LEAF_HINTS>,
    /// Per table the leaf of this transaction's last shared lookup in its primary index,
    /// tried first by its next one ([`BTree::get_hinted`](storage::btree::BTree::get_hinted)):
    /// ascending keys in one leaf (Stock-Level's items, sorted) skip the descent. Lookups for
    /// update do not use them: New-Order's stocks and the customers of Payment and Delivery
    /// come in no order, and each hinted leaf that does not hold the key is read for nothing
    /// (with every lookup hinted, `glass profile tpcc --instructions` had Stock-Level −5.5%
    /// and New-Order +2.3%, the full mix even). Kept apart from the insert hints, so that
    /// lookups between an order's line inserts do not evict theirs; emptied when a
    /// transaction begins, as they are.
    lookup_hints: ArrayVec<(u32, LeafHint), LEAF_HINTS>,
    /// The last transaction's entry in the active-transaction table (`xactions` on), renewed
    /// for the next one when no one else holds it: a transaction allocates none.
    spare_active: Option<Arc<ActiveTxn>>,
}

/// How many indexes a transaction keeps a leaf hint for; further ones take the last place.
const LEAF_HINTS: usize = 4;

/// The scratch an update is staged in (see `Transaction::stage_update`).
struct Staged<'a> {
    /// Columns from 64 on that the update set.
    wide: &'a mut Vec<usize>,
    /// The words a deferred update set, `(byte offset, bytes)`.
    words: &'a mut Vec<(usize, [u8; 8])>,
    /// The byte spans the changes rewrite, sorted.
    spans: &'a mut Vec<(usize, usize)>,
    /// A copy of the record with the new values written in; for an update in place, the new
    /// null bitmap (empty if no nullable column was set).
    rec: &'a mut Vec<u8>,
    /// The before image (one span's bytes, or pieces).
    before: &'a mut Vec<u8>,
}

/// What staging an update found to do.
enum Stage {
    /// Nothing was set.
    Unchanged,
    /// Write back `Staged::spans` of the copy `Staged::rec`.
    Spans,
    /// Write `Staged::words` (and the bitmap in `Staged::rec`) into the record in place.
    Words,
}

/// Where an update's new values come from.
enum Changes<'s, 'f> {
    /// Given by the caller ([`Tx::update`]).
    Given(&'s [(usize, Value)]),
    /// Computed from the current row ([`Tx::update_with`]).
    Computed(&'s mut UpdateFn<'f>),
}

impl Session {
    /// A fresh session with room for a typical OLTP transaction (a few dozen rows of a few
    /// hundred bytes), so its buffers are allocated once rather than regrown operation by
    /// operation.
    fn sized() -> Session {
        Session {
            undo: UndoList {
                entries: Vec::with_capacity(64),
                arena: Vec::with_capacity(4096),
            },
            key: Vec::with_capacity(64),
            key2: Vec::with_capacity(64),
            rec: Vec::with_capacity(1024),
            after: Vec::with_capacity(1024),
            hits: Hits::default(),
            hits_again: Hits::default(),
            found: Found::default(),
            held: Held {
                rows: Hits {
                    keys: Vec::with_capacity(256),
                    ends: Vec::with_capacity(HELD_MAX),
                },
                tables: Vec::with_capacity(HELD_MAX),
                next: 0,
            },
            wide: Vec::new(),
            words: Vec::with_capacity(16),
            spans: Vec::with_capacity(8),
            deleted: Vec::new(),
            leaf_hints: ArrayVec::new(),
            lookup_hints: ArrayVec::new(),
            spare_active: None,
        }
    }

    /// An active-transaction entry for transaction `id`: the spare one renewed if no one
    /// else holds it, else a new one.
    fn active_entry(&mut self, id: TxnId) -> Arc<ActiveTxn> {
        if let Some(mut spare) = self.spare_active.take() {
            if let Some(entry) = Arc::get_mut(&mut spare) {
                *entry = ActiveTxn::new(id);
                return spare;
            }
        }
        Arc::new(ActiveTxn::new(id))
    }

    /// Bytes the session's buffers hold (their capacities), roughly: what a thread keeps
    /// between transactions if it keeps this session.
    fn retained_bytes(&self) -> usize {
        fn bytes<T>(v: &Vec<T>) -> usize {
            v.capacity() * std::mem::size_of::<T>()
        }
        bytes(&self.undo.entries)
            + bytes(&self.undo.arena)
            + bytes(&self.key)
            + bytes(&self.key2)
            + bytes(&self.rec)
            + bytes(&self.after)
            + self.hits.retained_bytes()
            + self.hits_again.retained_bytes()
            + self.found.hits.retained_bytes()
            + self.held.rows.retained_bytes()
            + bytes(&self.held.tables)
            + bytes(&self.wide)
            + bytes(&self.words)
            + bytes(&self.spans)
            + bytes(&self.deleted)
    }

    /// The leaf hint for the index of lock space `space`, made empty the first time.
    fn leaf_hint(&mut self, space: u32) -> &mut LeafHint {
        hint_for(&mut self.leaf_hints, space)
    }

    /// The lookup hint for the primary index of table `table`, made empty the first time.
    fn lookup_hint(&mut self, table: u32) -> &mut LeafHint {
        hint_for(&mut self.lookup_hints, table)
    }
}

/// The hint of `hints` for `id`, made empty the first time; a full list gives up its last.
fn hint_for(hints: &mut ArrayVec<(u32, LeafHint), LEAF_HINTS>, id: u32) -> &mut LeafHint {
    let at = match hints.iter().position(|(s, _)| *s == id) {
        Some(at) => at,
        None => {
            if hints.is_full() {
                hints.pop();
            }
            hints.push((id, LeafHint::default()));
            hints.len() - 1
        }
    };
    &mut hints[at].1
}

/// Index entries a scan collected: their keys end to end in one buffer and, per entry, where
/// its key ends and its record's location — two buffers however many entries, where a
/// vector of keys took an allocation per entry (Stock-Level's scans: some 400 a transaction).
#[derive(Default, PartialEq, Eq)]
struct Hits {
    keys: Vec<u8>,
    ends: Vec<(usize, u64)>,
}

impl Hits {
    fn clear(&mut self) {
        self.keys.clear();
        self.ends.clear();
    }

    fn push(&mut self, key: &[u8], loc: u64) {
        self.keys.extend_from_slice(key);
        self.ends.push((self.keys.len(), loc));
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    /// The entries in the order collected: (key, location).
    fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> + '_ {
        let mut start = 0;
        self.ends.iter().map(move |&(end, loc)| {
            let key = &self.keys[start..end];
            start = end;
            (key, loc)
        })
    }

    /// Entry `i`: (key, location).
    fn entry(&self, i: usize) -> (&[u8], u64) {
        let start = if i == 0 { 0 } else { self.ends[i - 1].0 };
        let (end, loc) = self.ends[i];
        (&self.keys[start..end], loc)
    }

    /// The last entry's key.
    fn last_key(&self) -> Option<&[u8]> {
        let n = self.ends.len();
        let start = if n >= 2 { self.ends[n - 2].0 } else { 0 };
        self.ends.last().map(|&(end, _)| &self.keys[start..end])
    }

    /// Appends `other`'s entries after these.
    fn append(&mut self, other: &Hits) {
        let base = self.keys.len();
        self.keys.extend_from_slice(&other.keys);
        self.ends
            .extend(other.ends.iter().map(|&(end, loc)| (base + end, loc)));
    }

    fn retained_bytes(&self) -> usize {
        self.keys.capacity() + self.ends.capacity() * std::mem::size_of::<(usize, u64)>()
    }
}

/// The entries of this transaction's last scans of a table's primary index under record
/// locking, so that an update or delete of one of those rows takes its location from here
/// instead of descending the index again (Delivery updates each order line its scan found,
/// and deletes the new-order row each of its ten scans found: without this, one descent more
/// per row). Consecutive scans of one table in one lock mode add to the set, up to
/// [`FOUND_MAX`] entries; any other scan replaces it.
///
/// Sound while every entry's key lock is held — until the transaction ends, under two-phase
/// locking — and the transaction itself has moved none of them: a record keeps its id
/// through every update (one that outgrows its page leaves a forwarding stub) and no update
/// sets a key column, so only its own delete (or a step taken back) can. A delete marks its
/// own row's entry dead ([`Found::drop_key`]: the key may come back elsewhere, inserted
/// again); a step taken back empties the set ([`Found::forget`]). A new transaction starts
/// with it empty.
#[derive(Default)]
struct Found {
    /// The table whose primary index `hits` came from; `None`: nothing kept.
    table: Option<u32>,
    hits: Hits,
    /// Where the next lookup starts: just after the last one's match, since rows are mostly
    /// updated in the order their scan found them.
    next: usize,
    /// Whether the scan locked its rows exclusively (for update): an update of one of them
    /// then asks the lock manager for nothing more.
    exclusive: bool,
}

/// The most entries [`Found`] keeps. A lookup compares keys one by one from just after the
/// last match, so rows updated in the order found cost one comparison each however many are
/// kept. A procedure across a boundary scans all of Delivery's ORDER-LINE rows (some hundred,
/// ten scans) before it updates any; with 32 kept, most of its updates descended the index
/// again (see `docs/performance.md`, "Rows read for update keep their location").
const FOUND_MAX: usize = 128;

/// The location of a [`Found`] entry whose row this transaction deleted.
const DEAD: u64 = u64::MAX;

impl Found {
    /// The location of the row with encoded primary key `key` of table `table`, if the last
    /// scans found it. Inline, so that an access to a table with no rows kept (most of them)
    /// pays one comparison and no call.
    #[inline(always)]
    fn location(&mut self, table: u32, key: &[u8]) -> Option<u64> {
        if self.table != Some(table) {
            return None;
        }
        self.search(key)
    }

    /// [`Found::location`]'s search of the kept rows, from just after the last match.
    #[inline(never)]
    fn search(&mut self, key: &[u8]) -> Option<u64> {
        let n = self.hits.len();
        for i in 0..n {
            let at = (self.next + i) % n;
            let (k, loc) = self.hits.entry(at);
            if k == key {
                self.next = at + 1;
                return (loc != DEAD).then_some(loc);
            }
        }
        None
    }

    /// The row with encoded primary key `key` of table `table` is being deleted: its entry,
    /// if kept, is marked dead, so a later access finds the key by the index instead.
    #[inline]
    fn drop_key(&mut self, table: u32, key: &[u8]) {
        if self.table != Some(table) {
            return;
        }
        for i in 0..self.hits.ends.len() {
            if self.hits.entry(i).0 == key {
                self.hits.ends[i].1 = DEAD;
            }
        }
    }

    /// Keeps nothing: the transaction deleted a row or took a step back, or a new one begins.
    #[inline]
    fn forget(&mut self) {
        self.table = None;
    }
}

/// The rows this transaction read for update by key ([`Tx::get`] and [`Tx::read_with`] with
/// `for_update`), and where their records lie, kept for the update or delete that follows.
/// A procedure run away from the engine reads a row for update in one operation and writes
/// it in another (a WebAssembly or process guest's deferred write, an interactive client's),
/// and an embedded one that reads a row before it decides how to change it (Voter's tallies)
/// does the same; each write descended the primary index again and asked the lock manager
/// again for the lock its read holds.
///
/// Sound as [`Found`] is: each entry's key stays locked exclusively until the transaction
/// ends, and only the transaction's own delete ([`Held::drop_key`]) or a step taken back
/// (emptied) can move its record. Unlike `Found` it keeps rows of any table, up to
/// [`HELD_MAX`]: New-Order reads its stock rows, then its district, then updates them all.
#[derive(Default)]
struct Held {
    /// Each entry's key and its record's location, with [`Held::tables`] beside: entry `i`
    /// is a row of table `tables[i]`.
    rows: Hits,
    tables: Vec<u32>,
    /// Where the next lookup starts: rows are mostly written in the order they were read.
    next: usize,
}

/// The most entries [`Held`] keeps; a transaction that reads more for update finds the
/// rest by the index again.
const HELD_MAX: usize = 32;

impl Held {
    /// The location of row `key` (encoded) of table `table`, if read for update. Inline,
    /// so that a transaction that read none pays one comparison and no call.
    #[inline(always)]
    fn location(&mut self, table: u32, key: &[u8]) -> Option<u64> {
        if self.tables.is_empty() {
            return None;
        }
        self.search(table, key)
    }

    #[inline(never)]
    fn search(&mut self, table: u32, key: &[u8]) -> Option<u64> {
        let n = self.tables.len();
        for i in 0..n {
            let at = (self.next + i) % n;
            let (k, loc) = self.rows.entry(at);
            if self.tables[at] == table && k == key {
                self.next = at + 1;
                return (loc != DEAD).then_some(loc);
            }
        }
        None
    }

    /// Keeps row `key` of `table`, read for update and found at `loc`.
    fn keep(&mut self, table: u32, key: &[u8], loc: u64) {
        if self.tables.len() < HELD_MAX {
            self.rows.push(key, loc);
            self.tables.push(table);
        }
    }

    /// The row with encoded primary key `key` of table `table` is being deleted: its entry,
    /// if kept, is marked dead (the key may come back elsewhere, inserted again).
    fn drop_key(&mut self, table: u32, key: &[u8]) {
        for at in 0..self.tables.len() {
            if self.tables[at] == table && self.rows.entry(at).0 == key {
                self.rows.ends[at].1 = DEAD;
            }
        }
    }

    fn clear(&mut self) {
        self.rows.clear();
        self.tables.clear();
        self.next = 0;
    }
}

/// The most a thread keeps in its session's buffers between transactions.
const MAX_KEPT_SESSION_BYTES: usize = 1 << 20;

thread_local! {
    static SESSION: std::cell::RefCell<Option<Box<Session>>> = const { std::cell::RefCell::new(None) };
}

/// A point in a transaction's work ([`Transaction::savepoint`]): how many changes it had made
/// and records it had deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Savepoint {
    undo: usize,
    deleted: usize,
}

/// A running transaction. Commit or abort it; dropping it unfinished aborts it.
pub struct Transaction<'db> {
    db: &'db Database,
    id: TxnId,
    locks: Option<TxnLocks>,
    last_lsn: Lsn,
    /// Boxed: a transaction is moved by value (begin returns it, commit takes it), and the
    /// session's buffers inline were most of its size. Given back to the thread when the
    /// transaction is dropped (the one place it is taken out), so that nothing stands in for
    /// it: a stand-in was one allocation a transaction.
    s: ManuallyDrop<Box<Session>>,
    active: Option<Arc<ActiveTxn>>,
    /// The active-transaction table's shard `active` is in.
    active_shard: usize,
    finished: bool,
    /// Reads let go of their shared record (or page) locks as they end
    /// ([`Tx::read_committed`], where [`crate::DbConfig::read_committed`] honours it).
    read_committed: bool,
    /// This transaction counted as a reader of the trees' pages while it runs (leaf hints,
    /// backward scans and optimistic descents hold page ids), so no page unlinked meanwhile
    /// is handed out again before it ends (`storage::BufferPool::epoch_enter`).
    epoch: Option<storage::buffer::EpochToken>,
}

impl<'db> Transaction<'db> {
    #[inline(never)]
    pub(crate) fn begin(db: &'db Database) -> Transaction<'db> {
        let id = db.next_txn.next();
        // The thread's session from its last transaction, its buffers kept: a transaction
        // allocates none of them anew.
        let mut s = SESSION
            .try_with(|c| c.borrow_mut().take())
            .ok()
            .flatten()
            .unwrap_or_else(|| Box::new(Session::sized()));
        let (active, active_shard) = if db.xactions {
            let active = s.active_entry(id);
            let shard = db.register(&active);
            (Some(active), shard)
        } else {
            (None, 0)
        };
        s.leaf_hints.clear();
        s.lookup_hints.clear();
        s.found.forget();
        s.held.clear();
        if crate::profile::enabled() {
            crate::profile::begin(crate::profile::log_bytes(db.log.as_deref()));
        }
        Transaction {
            db,
            id,
            locks: db.locks.as_ref().map(|lm| lm.begin(txn::TxnId(id.0))),
            last_lsn: Lsn::NONE,
            s: ManuallyDrop::new(s),
            active,
            active_shard,
            finished: false,
            read_committed: false,
            epoch: db.pool.as_ref().and_then(|pool| pool.epoch_enter()),
        }
    }

    /// The body of [`Tx::scan`]: hands each record of `t` in `range` to `each`, in scan
    /// order, with its table's layout and the number of entries the scan found (a bound on
    /// the records to come), under the locks a scan takes.
    #[inline(always)]
    fn scan_records(
        &mut self,
        t: &TableRef,
        range: KeyRange<'_>,
        limit: Option<usize>,
        reverse: bool,
        for_update: bool,
        mut each: impl FnMut(&Layout, &[u8], usize) -> TxResult<()>,
    ) -> TxResult<()> {
        let table = self.table(t)?;
        let limit = limit.unwrap_or(usize::MAX);
        // The rows found so far, kept for this scan to add to if it is of the same table in
        // the same lock mode (see `Found`); forgotten meanwhile, in case it fails.
        let extends = self.s.found.table == Some(table.id) && self.s.found.exclusive == for_update;
        self.s.found.forget();
        let mark = self.short_read_mark(for_update);
        // The bounds are encoded into the session's key buffers (nothing below uses them).
        let mut lo = std::mem::take(&mut self.s.key);
        let mut hi = std::mem::take(&mut self.s.key2);
        let mut hits = std::mem::take(&mut self.s.hits);
        let r = (|| {
            lo.clear();
            hi.clear();
            let lob = table.key.low_bound(range.low, &mut lo)?;
            let hib = table.key.high_bound(range.high, &mut hi)?;
            let floor = scan_floor(self.db.locks.is_some(), &table.key, (&lo, lob));
            self.collect_locked(
                &table.primary,
                ((&lo, lob), (&hi, hib)),
                reverse,
                limit,
                &mut hits,
                &table.schema.name,
                ((table.id, table.id, for_update), floor),
                |this, key, loc, key_locked, floor| {
                    if key_locked {
                        Ok(())
                    } else if this.db.page_locking {
                        this.lock_page_of(table.id, loc, for_update)
                    } else {
                        this.lock_key(table.id, key, for_update, floor)
                    }
                },
            )?;
            // With locking, `collect_locked` has checked that the entries it locked are the
            // entries there are, so their locations stand. Without it, look each key up again.
            let locked = self.db.locks.is_some();
            let found = hits.len();
            for (key, loc) in hits.iter() {
                let loc = if locked {
                    Some(loc)
                } else {
                    table.primary.get(key)?
                };
                if let Some(loc) = loc {
                    let read = |rec: &[u8]| each(&table.layout, rec, found);
                    if let Some(done) = table.records.with(loc, read)? {
                        done?;
                    }
                }
            }
            Ok(())
        })();
        // The rows' keys stay locked, so their locations stand for the updates that follow
        // (see `Found`); under page locking a key's lock is its record's page's.
        if r.is_ok() && self.db.locks.is_some() && !self.db.page_locking && hits.len() <= FOUND_MAX
        {
            let found = &mut self.s.found;
            if extends && found.hits.len() + hits.len() <= FOUND_MAX {
                found.next = found.hits.len();
                found.hits.append(&hits);
            } else {
                std::mem::swap(&mut hits, &mut found.hits);
                found.next = 0;
                found.exclusive = for_update;
            }
            found.table = Some(table.id);
        }
        self.s.hits = hits;
        self.s.key = lo;
        self.s.key2 = hi;
        self.end_short_read(mark);
        r
    }

    /// Where a read's own locks will begin in the transaction's list of held locks, if the
    /// read is to let them go as it ends (see [`Tx::read_committed`]).
    #[inline(always)]
    fn short_read_mark(&self, for_update: bool) -> Option<usize> {
        if !self.read_committed || for_update {
            return None;
        }
        self.locks.as_ref().map(|l| l.held().len())
    }

    /// Ends a read begun at `mark` (from `short_read_mark`): its shared record (or, under
    /// page-level locking, page) locks go.
    /// Inline, so that a serializable read pays one test of `None`.
    #[inline(always)]
    fn end_short_read(&mut self, mark: Option<usize>) {
        if let Some(mark) = mark {
            self.release_short_read(mark);
        }
    }

    /// [`Self::end_short_read`]'s work. Rows a scan found are forgotten with the locks,
    /// since another transaction may now move or delete them.
    #[cold]
    #[inline(never)]
    fn release_short_read(&mut self, mark: usize) {
        if let (Some(lm), Some(locks)) = (&self.db.locks, self.locks.as_mut()) {
            lm.release_shared_leaves_from(locks, mark);
            self.s.found.forget();
        }
    }

    /// This transaction's id.
    pub fn id(&self) -> u64 {
        self.id.0
    }

    /// The id of the transaction of this one's thread that a lock request of this one was
    /// last refused for (a server's worker binds transactions to its thread: a wait for one of
    /// its own is refused, `txn::LockError::SameThread`): the one whose end may let it go on.
    pub fn refused_by(&self) -> Option<u64> {
        self.locks.as_ref()?.refused_by().map(|t| t.0)
    }

    /// Forgets the last refusal ([`Transaction::refused_by`] names none until the next), so
    /// that a caller can tell whether the work it starts now is refused.
    pub fn forget_refusal(&mut self) {
        if let Some(locks) = self.locks.as_mut() {
            locks.forget_refusal();
        }
    }

    /// Where the transaction stands now, to take back to later ([`Transaction::rollback_to`]).
    pub fn savepoint(&self) -> Savepoint {
        Savepoint {
            undo: self.s.undo.entries.len(),
            deleted: self.s.deleted.len(),
        }
    }

    /// Takes back every change made since `savepoint` (newest first, each compensation
    /// logged, as an abort does) and leaves the transaction open: a statement-level rollback.
    /// Locks taken since are kept (two-phase locking lets none go before the end). After an
    /// operation failed, its partial changes are among those taken back, so the transaction
    /// may go on from the savepoint.
    pub fn rollback_to(&mut self, savepoint: Savepoint) -> TxResult<()> {
        while self.s.undo.entries.len() > savepoint.undo {
            self.undo_last()?;
        }
        // A delete taken back leaves its record in place: not to be freed at the commit.
        self.s.deleted.truncate(savepoint.deleted);
        // Hints to leaves and rows found may name what was taken back.
        self.s.leaf_hints.clear();
        self.s.lookup_hints.clear();
        self.s.found.forget();
        self.s.held.clear();
        Ok(())
    }

    /// Whether a lock request of this transaction has waited out the lock wait's bound
    /// ([`crate::DbConfig::lock_wait_timeout`]) and failed.
    pub fn lock_timed_out(&self) -> bool {
        self.locks.as_ref().is_some_and(|l| l.stats().timeouts > 0)
    }

    /// Time this transaction has waited for locks so far, in nanoseconds.
    pub fn lock_wait_ns(&self) -> u64 {
        self.locks.as_ref().map_or(0, |l| l.stats().wait_ns)
    }

    /// Of [`Transaction::lock_wait_ns`], the time a transaction on the blocking chain was
    /// inside a physical read (sampled; with [`crate::DbConfig::attribute_lock_waits`]).
    pub fn lock_wait_io_ns(&self) -> u64 {
        self.locks.as_ref().map_or(0, |l| l.wait_io_ns())
    }

    /// Makes the transaction's effects permanent (durable once this returns, when the database
    /// forces the log) and releases its locks.
    #[inline(never)]
    pub fn commit(mut self) -> TxResult<()> {
        // Deleted records are freed before the commit record, so their frees come before it in
        // the log: once the commit is durable, so are they. (Freed after it, a crash between
        // the two left records no index entry names, which `glass check` reports.) A failure
        // here drops the transaction, which rolls back; undo restores a freed record.
        self.free_deleted()?;
        if let Some(log) = &self.db.log {
            if self.last_lsn != Lsn::NONE {
                let (id, prev) = (self.id, self.last_lsn);
                let lsn = match &self.active {
                    // Shared latch on the active table's shard while the record is appended (see
                    // the checkpoint protocol in recovery.rs); the wait for the log's force
                    // below holds no latch at all, so a transaction beginning meanwhile (which
                    // latches the shard exclusively) does not wait for the disk.
                    Some(a) => self.db.with_active_shared(self.active_shard, || {
                        let lsn = log.append_commit(id, prev);
                        a.committed.store(true, Ordering::Relaxed);
                        lsn
                    }),
                    None => log.append_commit(id, prev),
                };
                self.last_lsn = lsn;
                if self.db.early_lock_release {
                    self.release_early(lsn);
                }
                log.wait_durable(lsn)
                    .map_err(|e| TxError::Storage(e.into()))?;
            } else if self.db.early_lock_release {
                // Wrote nothing, but may have read what a transaction whose locks were
                // released early wrote: not durable yet, so not to be acted on yet.
                let released = Lsn(self.db.released_commits.load(Ordering::Acquire));
                if released != Lsn::NONE && log.durable_lsn() <= released {
                    log.flush_to(released)
                        .map_err(|e| TxError::Storage(e.into()))?;
                }
            }
        }
        self.finish();
        self.db.maybe_checkpoint()
    }

    /// Early lock release: the commit record at `lsn` is in the log buffer, not yet durable.
    /// Raises the mark a read-only transaction waits past, then releases every lock, so that
    /// whoever takes one of them next sees the mark raised (the lock's latch orders the two).
    /// If the force then fails, no later commit becomes durable either: the log refuses
    /// every force after a failed one.
    fn release_early(&mut self, lsn: Lsn) {
        self.db.released_commits.fetch_max(lsn.0, Ordering::AcqRel);
        if crate::profile::enabled() {
            crate::profile::before_early_release(self.locks.as_ref());
        }
        if let (Some(lm), Some(locks)) = (&self.db.locks, self.locks.as_mut()) {
            lm.release_all(locks);
        }
    }

    /// Takes back every effect of the transaction and releases its locks.
    pub fn abort(mut self) -> TxResult<()> {
        let r = self.rollback();
        self.finish();
        r
    }

    fn rollback(&mut self) -> TxResult<()> {
        let logging = self.db.log_records;
        if logging && !self.s.undo.entries.is_empty() {
            let log = self.db.log.as_ref().unwrap();
            self.last_lsn = log.append_publishing(
                &LogRecord::Abort {
                    txn: self.id,
                    prev: self.last_lsn,
                },
                self.active.as_ref().map(|a| &a.last_lsn),
            );
        }
        while !self.s.undo.entries.is_empty() {
            self.undo_last()?;
        }
        if logging && self.last_lsn != Lsn::NONE {
            let log = self.db.log.as_ref().unwrap();
            log.append(&LogRecord::End {
                txn: self.id,
                prev: self.last_lsn,
            });
        }
        Ok(())
    }

    /// Frees the records this transaction deleted, as it commits (just before its commit
    /// record). Other transactions may reuse a freed slot at once: undo of a delete after this
    /// (a commit that failed, or a crash before the commit record was durable) finds the slot
    /// free or holding another record, and restores elsewhere if need be.
    fn free_deleted(&mut self) -> TxResult<()> {
        let mut deleted = std::mem::take(&mut self.s.deleted);
        let mut r = Ok(());
        for (table, loc) in deleted.drain(..) {
            let freed = self
                .db
                .table_by_id(table)
                .and_then(|t| t.records.delete(loc).map_err(TxError::from));
            if let Err(e) = freed {
                r = Err(e);
            }
        }
        self.s.deleted = deleted;
        r
    }

    fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        if crate::profile::enabled() {
            let log_bytes = crate::profile::log_bytes(self.db.log.as_deref());
            crate::profile::end(self.locks.as_ref(), log_bytes);
        }
        if let (Some(lm), Some(locks)) = (&self.db.locks, self.locks.as_mut()) {
            lm.release_all(locks);
        }
        if let Some(a) = self.active.take() {
            self.db.deregister(&a, self.active_shard);
            self.s.spare_active = Some(a);
        }
        if let (Some(token), Some(pool)) = (self.epoch.take(), &self.db.pool) {
            pool.epoch_exit(token);
        }
    }

    /// Gives the session back to the thread for its next transaction, unless a large
    /// transaction grew it (a bulk load's undo list): that memory is returned instead.
    fn keep_session(mut s: Box<Session>) {
        if s.retained_bytes() <= MAX_KEPT_SESSION_BYTES {
            s.undo.clear();
            s.deleted.clear();
            s.hits.clear();
            s.hits_again.clear();
            s.found.forget();
            s.found.hits.clear();
            s.held.clear();
            // A thread being torn down has no slot left: the session is dropped.
            let _ = SESSION.try_with(|c| *c.borrow_mut() = Some(s));
        }
    }

    #[inline]
    fn table(&self, t: &TableRef) -> TxResult<&'db Table> {
        self.db.resolve_table(t)
    }

    /// The floor for the next-key lock of a delete of `key` (lock space `table`, rank
    /// `rank`): the part of the gap above the key, unless this transaction's own lock on the
    /// key guards the gap below it too (a scan's does, from its range's low end). Once the
    /// entry is gone that gap is the next key's, and the next key's lock must guard it, or an
    /// insert there would pass both: a phantom in the range the scan read.
    fn merged_floor(&self, table: u32, key: &[u8], rank: KeyRank) -> KeyRank {
        match (&self.db.locks, self.locks.as_ref()) {
            (Some(lm), Some(locks)) => lm
                .held_floor(locks, table, key_hash(table, key))
                .map_or(rank, |held| held.min(rank)),
            _ => rank,
        }
    }

    /// Locks the encoded key `key` in lock space `table`, guarding the gap below it from
    /// `floor` up (`txn::lock::KeyRank`: a point access guards no gap, `NO_GAP`; a scan from
    /// its range's low end). Without a lock manager (`locking` off) this is
    /// one inlined test; the request itself is out of line.
    #[inline]
    fn lock_key(
        &mut self,
        table: u32,
        key: &[u8],
        exclusive: bool,
        floor: KeyRank,
    ) -> TxResult<()> {
        if self.db.locks.is_none() {
            return Ok(());
        }
        self.request_key_lock(table, key, exclusive, floor)
    }

    #[inline(never)]
    fn request_key_lock(
        &mut self,
        table: u32,
        key: &[u8],
        exclusive: bool,
        floor: KeyRank,
    ) -> TxResult<()> {
        if let (Some(lm), Some(locks)) = (&self.db.locks, self.locks.as_mut()) {
            let mode = if exclusive { LockMode::X } else { LockMode::S };
            lm.lock_record(locks, table, key_hash(table, key), mode, floor)
                .map_err(|e| TxError::Retry(e.to_string()))?;
        }
        Ok(())
    }

    /// Locks the heap page holding the record at `loc` (page-level locking).
    fn lock_page_of(&mut self, table: u32, loc: u64, exclusive: bool) -> TxResult<()> {
        if let (Some(lm), Some(locks)) = (&self.db.locks, self.locks.as_mut()) {
            let mode = if exclusive { LockMode::X } else { LockMode::S };
            let page = storage::heap::RecordId::from_u64(loc).page.0;
            lm.lock_page(locks, table, page, mode)
                .map_err(|e| TxError::Retry(e.to_string()))?;
        }
        Ok(())
    }

    /// Starts loading the index slot of the row `key` of `t` (an integer key of a main-memory
    /// integer index); the table and packed key when it did, for a pass that follows.
    #[inline(always)]
    fn prefetch_slot(&self, t: &TableRef, key: &[i64]) -> Option<(&'db Table, u64)> {
        let table = self.table(t).ok()?;
        let k = table.key.pack(key)?;
        table.primary.prefetch_int(k).then_some((table, k))
    }

    /// The two passes of [`Tx::prefetch`]: every named row's index slot, then `load` of each
    /// record found.
    #[inline]
    fn prefetch_found(&self, rows: &[(&TableRef, &[i64])], load: impl Fn(&Table, u64)) {
        if !self.db.prefetch {
            return;
        }
        for batch in rows.chunks(PREFETCH_BATCH) {
            let mut slots: ArrayVec<(&Table, u64), PREFETCH_BATCH> = ArrayVec::new();
            for (t, key) in batch {
                if let Some(slot) = self.prefetch_slot(t, key) {
                    slots.push(slot);
                }
            }
            for &(table, k) in &slots {
                if let Some(loc) = table.primary.get_int(k) {
                    load(table, loc);
                }
            }
        }
    }

    /// Finds the record with encoded primary key `k` and locks it. With record locking the
    /// key is locked *before* the lookup, so an absent key stays locked (no phantom can
    /// appear under a point read). With page locking the record's heap page is locked after
    /// the lookup, and the lookup is repeated to confirm the record did not move meanwhile;
    /// an absent key is locked by name.
    ///
    /// A read of a read-only table takes no record lock (see [`Database::set_read_only`]); an
    /// exclusive access to one is refused.
    #[inline(always)]
    fn find_locked(&mut self, table: &Table, k: &[u8], exclusive: bool) -> TxResult<Option<u64>> {
        self.find_locked_keeping(table, k, exclusive, false)
    }

    /// [`Transaction::find_locked`]; with `keep`, a row found for update by the index is kept
    /// in [`Held`] for the write that follows (a read for update's lookup).
    #[inline(always)]
    fn find_locked_keeping(
        &mut self,
        table: &Table,
        k: &[u8],
        exclusive: bool,
        keep: bool,
    ) -> TxResult<Option<u64>> {
        if !self.db.page_locking && !table.is_read_only() {
            // A row the last scans found, or this transaction read for update, is locked
            // already, in the scans' mode or exclusively, so its location stands; where that
            // mode covers this access, the lock manager is not asked again.
            // (A shared read of a row read for update is rare: only writes look there.)
            let mut kept = self.s.found.location(table.id, k);
            let mut kept_exclusive = self.s.found.exclusive;
            if kept.is_none() && exclusive {
                kept = self.s.held.location(table.id, k);
                kept_exclusive = true;
            }
            if kept.is_none() || (exclusive && !kept_exclusive) {
                self.lock_key(table.id, k, exclusive, NO_GAP)?;
            }
            if exclusive {
                // Again under the lock: the table may have turned read-only meanwhile.
                self.writable(table)?;
            }
            if kept.is_some() {
                return Ok(kept);
            }
            // Shared lookups only: Stock-Level's come in key order, where the last one's
            // leaf often holds the next key; writes come in the order a procedure names its
            // rows, and a hint missed costs more than it saves (see `lookup_hints`).
            if exclusive {
                let loc = table.primary.get(k)?;
                if let (true, Some(loc), Some(_)) = (keep, loc, &self.db.locks) {
                    self.s.held.keep(table.id, k, loc);
                }
                return Ok(loc);
            }
            return Ok(table.primary.get_hinted(k, self.s.lookup_hint(table.id))?);
        }
        self.find_locked_slow(table, k, exclusive)
    }

    /// [`Transaction::find_locked`] on a read-only table, or under page-level locking.
    #[inline(never)]
    fn find_locked_slow(
        &mut self,
        table: &Table,
        k: &[u8],
        exclusive: bool,
    ) -> TxResult<Option<u64>> {
        if !exclusive && table.is_read_only() && self.holds_read_only(table)? {
            return Ok(table.primary.get(k)?);
        }
        let found = if !self.db.page_locking {
            self.lock_key(table.id, k, exclusive, NO_GAP)?;
            table.primary.get(k)?
        } else {
            self.find_page_locked(table, k, exclusive)?
        };
        if exclusive {
            self.writable(table)?;
        }
        Ok(found)
    }

    /// Whether `table` is read-only for this transaction: it takes the table's `IS` (which a
    /// switch back to writable, `X` on the table, waits out) and then reads the flag, so a
    /// `true` holds until this transaction ends and its reads need no record locks.
    #[inline(never)]
    fn holds_read_only(&mut self, table: &Table) -> TxResult<bool> {
        if let (Some(lm), Some(locks)) = (&self.db.locks, self.locks.as_mut()) {
            lm.lock_table(locks, table.id, LockMode::IS)
                .map_err(|e| TxError::Retry(e.to_string()))?;
        }
        Ok(table.is_read_only())
    }

    /// Refuses a write to a read-only table. Called once the write's record lock is held, and
    /// with it the table's `IX`, which the switch to read-only (`S` on the table) waits out: a
    /// writer that held `IX` first finishes before the switch, one that got it after sees it.
    #[inline]
    fn writable(&self, table: &Table) -> TxResult<()> {
        if table.is_read_only() {
            return Err(TxError::Invalid(format!(
                "table {} is read-only: it refuses inserts, updates and deletes",
                table.schema.name
            )));
        }
        Ok(())
    }

    /// Takes `mode` on table `table` itself (for [`Database::set_read_only`]); nothing without
    /// a lock manager.
    pub(crate) fn lock_whole_table(&mut self, table: u32, mode: LockMode) -> TxResult<()> {
        if let (Some(lm), Some(locks)) = (&self.db.locks, self.locks.as_mut()) {
            lm.lock_table(locks, table, mode)
                .map_err(|e| TxError::Retry(e.to_string()))?;
        }
        Ok(())
    }

    /// [`Transaction::find_locked`] under page-level locking.
    #[inline(never)]
    fn find_page_locked(
        &mut self,
        table: &Table,
        k: &[u8],
        exclusive: bool,
    ) -> TxResult<Option<u64>> {
        let mut loc = table.primary.get(k)?;
        for _ in 0..8 {
            match loc {
                None => {
                    self.lock_key(table.id, k, exclusive, NO_GAP)?;
                    loc = table.primary.get(k)?;
                    if loc.is_none() {
                        return Ok(None);
                    }
                }
                Some(l) => {
                    self.lock_page_of(table.id, l, exclusive)?;
                    let again = table.primary.get(k)?;
                    if again == Some(l) {
                        return Ok(again);
                    }
                    loc = again;
                }
            }
        }
        Err(TxError::Retry(format!(
            "a row of {} kept moving while it was being locked",
            table.schema.name
        )))
    }

    /// Encodes `key` into `k`, locks the row exclusively and copies it into `rec`; returns its
    /// location, or `None` if there is no such row (update and delete start here).
    fn locked_copy(
        &mut self,
        table: &Table,
        key: &[Value],
        k: &mut Vec<u8>,
        rec: &mut Vec<u8>,
    ) -> TxResult<Option<u64>> {
        table.key.encode(key, k)?;
        let Some(loc) = self.find_locked(table, k, true)? else {
            return Ok(None);
        };
        let found = table.records.with(loc, |r| {
            rec.clear();
            rec.extend_from_slice(r);
        })?;
        Ok(found.map(|()| loc))
    }

    /// Logs the undo record of an operation about to happen, held back
    /// (`LogManager::hold_update_publishing`) so that the operation's redo record, appended
    /// as its page's latch is released, carries it into the log buffer under one latch
    /// acquisition: one fewer on the latch every thread appends under, for every update,
    /// insert and delete. The caller settles the held record into `last_lsn` once the
    /// operation's write is done (or failed). `prev` is the transaction's last LSN (the
    /// undo-next of a compensation for this operation). An associated function on the
    /// transaction's parts, so that the held record may borrow the active-transaction cell
    /// while the caller goes on using the transaction's other fields.
    ///
    /// # Safety
    ///
    /// The caller settles or drops the returned record, never leaks it (see
    /// `LogManager::hold_update_publishing`).
    #[inline(always)]
    unsafe fn hold_undo<'t>(
        db: &'t Database,
        id: TxnId,
        prev: Lsn,
        active: Option<&'t ActiveTxn>,
        op: UndoOp<'_>,
    ) -> Option<wal::HeldUpdate<'t>> {
        // Without a log (the ladder's rungs from `lsn` on) one inlined test, no call.
        let log = db.log.as_ref()?;
        // SAFETY: passed on to the caller (this function's own contract).
        Some(unsafe { Self::hold_undo_in(db, log, id, prev, active, op) })
    }

    /// [`Transaction::hold_undo`] with a log.
    ///
    /// # Safety
    ///
    /// As [`Transaction::hold_undo`].
    #[inline(never)]
    unsafe fn hold_undo_in<'t>(
        db: &'t Database,
        log: &'t wal::LogManager,
        id: TxnId,
        prev: Lsn,
        active: Option<&'t ActiveTxn>,
        op: UndoOp<'_>,
    ) -> wal::HeldUpdate<'t> {
        if let Some(a) = active {
            a.touch();
            if prev == Lsn::NONE {
                a.note_first_record(log);
            }
        }
        // The LSN goes into the active-transaction table under the log buffer latch (see
        // `LogManager::append_publishing`: a checkpoint must not miss this record).
        let cell = active.map(|a| &a.last_lsn);
        // The payload (`UndoOp::encode`) in its two parts, encoded straight into the held
        // frame.
        let header = op.header();
        let parts: &[&[u8]] = if db.log_records {
            &[&header, op.before]
        } else {
            &[]
        };
        // SAFETY: passed on to the caller (this function's own contract).
        unsafe { log.hold_update_parts_publishing(id, prev, parts, cell) }
    }

    /// Update and read-modify-write: finds and locks the row once, works out the changes
    /// (computed from the row itself for `update_with`), and copies only the changed byte
    /// spans out of the record (see `Database::changed_spans`): they are both the before image
    /// (undo) and, once the new values are written into them, the after image.
    ///
    /// On the main-memory store without a log (the ladder's rungs 9 and 10, where no redo or
    /// undo record is written) an update that sets only integers and floats is made in place
    /// instead: the writer notes each word, and each is written straight into the record, its
    /// before image going to the undo list as a piece of its own (see `RowWriter`).
    fn update_row(
        &mut self,
        t: &TableRef,
        key: &[Value],
        mut changes: Changes<'_, '_>,
    ) -> TxResult<bool> {
        let table = self.table(t)?;
        let db = self.db;
        let in_place = db.log.is_none() && table.records.is_mem();
        let mut k = std::mem::take(&mut self.s.key);
        let mut rec = std::mem::take(&mut self.s.rec);
        let mut before = std::mem::take(&mut self.s.after);
        let mut wide = std::mem::take(&mut self.s.wide);
        let mut words = std::mem::take(&mut self.s.words);
        let mut spans = std::mem::take(&mut self.s.spans);
        let r = (|| {
            table.key.encode(key, &mut k)?;
            let Some(loc) = self.find_locked(table, &k, true)? else {
                return Ok(false);
            };
            // Read and written under one exclusive latch of the record's page.
            let Some(record) = table.records.fix_for_update(loc)? else {
                return Ok(false);
            };
            let stage = record.read(|bytes| {
                let mut staged = Staged {
                    wide: &mut wide,
                    words: &mut words,
                    spans: &mut spans,
                    rec: &mut rec,
                    before: &mut before,
                };
                Self::stage_update(db, table, bytes, &mut changes, &mut staged, in_place)
            })?;
            match stage {
                Stage::Unchanged => return Ok(true),
                Stage::Words => {
                    // Only the main-memory store stages words: `record` holds no latch.
                    drop(record);
                    let written = table.records.write_words(loc, &words, &rec);
                    self.s.undo.push(
                        KIND_UPDATE_PIECES,
                        table.id,
                        loc,
                        0,
                        &before,
                        self.last_lsn.0,
                    );
                    written?;
                    return Ok(true);
                }
                Stage::Spans => {}
            }
            // One span: a plain update of `lo..hi`. Several (columns far apart): an update
            // in pieces, so neither log nor undo list carries the bytes between them.
            let (kind, offset) = match spans.as_slice() {
                [(lo, _)] => (KIND_UPDATE, *lo),
                _ => (KIND_UPDATE_PIECES, 0),
            };
            let prev = self.last_lsn;
            let op = UndoOp {
                kind,
                table: table.id,
                loc,
                offset: offset as u16,
                before: &before,
            };
            let active = self.active.as_deref();
            // SAFETY: settled below, whatever the write's outcome.
            let held = unsafe { Self::hold_undo(db, self.id, prev, active, op) };
            let mut pieces: [(usize, &[u8]); crate::db::MAX_SPANS] =
                [(0, &[]); crate::db::MAX_SPANS];
            for (piece, &(lo, hi)) in pieces.iter_mut().zip(spans.iter()) {
                *piece = (lo, &rec[lo..hi]);
            }
            // The latch goes, and the page's redo record is logged, before the undo settles.
            let written = record.write_pieces(&pieces[..spans.len()]);
            if let Some(held) = held {
                self.last_lsn = held.settle();
            }
            let prev = prev.0;
            self.s
                .undo
                .push(kind, table.id, loc, offset as u16, &before, prev);
            written?;
            Ok(true)
        })();
        self.s.key = k;
        self.s.rec = rec;
        self.s.after = before;
        self.s.wide = wide;
        self.s.words = words;
        self.s.spans = spans;
        r
    }

    /// Computes an update of the stored record `bytes` (under its page's exclusive latch,
    /// which the write that follows keeps: `Records::fix_for_update`): copies the record into `rec`, writes the new values into the copy
    /// (given, or set by the procedure's callback through a [`RowWriter`]), and works out the
    /// byte spans that changed and their before image. With `in_place` the writer starts
    /// deferred (see `update_row`), and an update of words alone stays so: its before image is
    /// a piece per column set (and the null bitmap, if a nullable column was set, whose new
    /// bytes go to `rec`). Never inlined, so profiles can tell this "update record" work from
    /// the record access around it.
    #[inline(never)]
    fn stage_update(
        db: &Database,
        table: &Table,
        bytes: &[u8],
        changes: &mut Changes<'_, '_>,
        out: &mut Staged<'_>,
        in_place: bool,
    ) -> TxResult<Stage> {
        let layout = &table.layout;
        out.wide.clear();
        out.words.clear();
        let mut writer = RowWriter::record(layout, bytes, out.rec, out.words, out.wide, in_place);
        match changes {
            Changes::Given(given) => {
                for (c, v) in given.iter() {
                    writer.set_ref(*c, v);
                }
            }
            Changes::Computed(f) => f(RowRef::record(layout, bytes), &mut writer)?,
        }
        // A bad value fails here, before anything is logged or written.
        let written = writer.finish()?;
        if written.mask == 0 && out.wide.is_empty() {
            return Ok(Stage::Unchanged);
        }
        out.before.clear();
        if !written.copied {
            return Self::stage_words(db, table, bytes, written.mask, out);
        }
        db.changed_spans(table, written.mask, out.wide, out.spans)?;
        for &(lo, hi) in out.spans.iter() {
            if out.spans.len() == 1 {
                out.before.extend_from_slice(&bytes[lo..hi]);
            } else {
                push_piece(out.before, lo, &bytes[lo..hi]);
            }
        }
        Ok(Stage::Spans)
    }

    /// The rest of [`Transaction::stage_update`] for an update of words in place (columns
    /// `mask`, all below 64 and of the table, as the writer checked): refuses key columns,
    /// and builds the before image of each column set and, if any is nullable, of the null
    /// bitmap, whose new bytes (those bits cleared) it puts in `out.rec`.
    #[inline]
    fn stage_words(
        db: &Database,
        table: &Table,
        bytes: &[u8],
        mask: u64,
        out: &mut Staged<'_>,
    ) -> TxResult<Stage> {
        let layout = &table.layout;
        if mask & table.indexed_columns.load(Ordering::Relaxed) != 0 {
            return Err(Self::refuse_key_columns(db, table, mask));
        }
        out.rec.clear();
        if mask & layout.nullable_mask() != 0 {
            let bitmap = &bytes[..layout.bitmap_len()];
            push_piece(out.before, 0, bitmap);
            out.rec.extend_from_slice(bitmap);
            Layout::clear_null_bits(out.rec, mask & layout.nullable_mask());
        }
        let mut rest = mask;
        while rest != 0 {
            let at = layout.column_range(rest.trailing_zeros() as usize).start;
            let word = bytes[at..at + 8].try_into().expect("an 8-byte column");
            push_word_piece(out.before, at, word);
            rest &= rest - 1;
        }
        Ok(Stage::Words)
    }

    /// The error for an update of columns `mask`, some of which belong to an index key: the
    /// general path's, which names the column.
    #[cold]
    #[inline(never)]
    fn refuse_key_columns(db: &Database, table: &Table, mask: u64) -> TxError {
        match db.changed_spans(table, mask, &[], &mut Vec::new()) {
            Err(e) => e,
            Ok(()) => TxError::Invalid(format!(
                "an update of {} sets a key column",
                table.schema.name
            )),
        }
    }

    pub(crate) fn project(layout: &Layout, rec: &[u8], fetch: Fetch<'_>) -> Row {
        match fetch {
            Fetch::All => (0..layout.columns())
                .map(|c| layout.read_column(rec, c))
                .collect(),
            Fetch::Cols(cols) => cols.iter().map(|c| layout.read_column(rec, *c)).collect(),
        }
    }

    pub(crate) fn check_fetch(table: &Table, fetch: Fetch<'_>) -> TxResult<()> {
        if let Fetch::Cols(cols) = fetch {
            if let Some(c) = cols.iter().find(|c| **c >= table.layout.columns()) {
                return Err(TxError::Invalid(format!(
                    "table {} has no column {c}",
                    table.schema.name
                )));
            }
        }
        Ok(())
    }

    /// Collects the entries of `store` within the bounds encoded in `lo`/`hi`.
    fn collect(
        store: &crate::table::IndexStore,
        lo: (&[u8], Bound<()>),
        hi: (&[u8], Bound<()>),
        reverse: bool,
        limit: usize,
        hits: &mut Hits,
        what: &str,
    ) -> TxResult<()> {
        hits.clear();
        let lo = lo.1.map(|_| lo.0);
        let hi = hi.1.map(|_| hi.0);
        let done = store.scan(lo, hi, reverse, limit, |k, v| {
            hits.push(k, v);
            true
        })?;
        if done.is_none() {
            return Err(TxError::Invalid(format!(
                "{what} is a hash index: it cannot scan"
            )));
        }
        Ok(())
    }

    /// Collects the entries of `store` within the bounds and, with locking on, locks them:
    /// each entry's key in lock space `next.0` (exclusively if `next.2`), then the key after
    /// the last (or the end of the index), and `lock_entry(this, key, loc, key_locked)` on
    /// each entry for whatever else it needs (its key too where `key_locked` is false: under
    /// page locking a key's lock is its record's page's). It returns once the entries it
    /// locked are the entries there are.
    ///
    /// Why that needs care: entries read under latches and locked after can miss an insert
    /// into a gap of the range that lands in between (its check of the next key's lock is an
    /// instant's, so the scan may even get that lock at once): a rescan in the same
    /// transaction would then find it (a phantom). A forward scan of a B+-tree under record
    /// locking asks for every lock conditionally as it reads the entries, under the leaves'
    /// latches ([`Self::collect_once`]); granted all, the range is its own. Otherwise (a
    /// refusal, a backward scan, page locking, a main-memory index) it locks what it read
    /// and collects again, until the two agree: once every collected entry and the next key
    /// are locked, no insert or delete can reach the range (each needs an exclusive lock on
    /// the key after its own), so the second look is final unless something slipped in
    /// before the locks.
    #[allow(clippy::too_many_arguments)]
    fn collect_locked(
        &mut self,
        store: &crate::table::IndexStore,
        (lo, hi): ScanBounds<'_>,
        reverse: bool,
        limit: usize,
        hits: &mut Hits,
        what: &str,
        (next, floor): ((u32, u32, bool), KeyRank),
        mut lock_entry: impl FnMut(&mut Self, &[u8], u64, bool, KeyRank) -> TxResult<()>,
    ) -> TxResult<()> {
        let once = if reverse {
            None
        } else {
            self.collect_once(store, (lo, hi), limit, hits, (next.0, next.2), floor)?
        };
        if once == Some(true) {
            return hits
                .iter()
                .try_for_each(|(key, loc)| lock_entry(self, key, loc, true, floor));
        }
        if once.is_none() {
            Self::collect(store, lo, hi, reverse, limit, hits, what)?;
        }
        if self.db.locks.is_none() {
            return Ok(());
        }
        // The second collection goes into the session's other buffer, given back after.
        let mut fresh = std::mem::take(&mut self.s.hits_again);
        // The next key's lock this scan took last time round (see `lock_next_key`), unless it
        // has become one of the entries, whose locks stay.
        let mut taken = None;
        let r = (|| loop {
            for (key, loc) in hits.iter() {
                lock_entry(self, key, loc, false, floor)?;
                if taken.is_some() && taken == Some(key_hash(next.0, key)) {
                    taken = None;
                }
            }
            // The gaps between entries are guarded by the entries' own locks (an insert
            // locks the key after it). What is left is the gap above the highest entry: a
            // forward scan that stopped at its limit took no more than its entries; otherwise
            // the key after the last entry guards the rest of the range. A backward scan
            // starts at the top, so the key after the range's high end guards it, whatever
            // the limit.
            let high = hi.1.map(|_| hi.0);
            if reverse {
                self.lock_next_key(
                    (next.0, next.1),
                    store,
                    None,
                    high,
                    next.2,
                    floor,
                    &mut taken,
                )?;
            } else if hits.len() < limit {
                let last = hits.last_key();
                self.lock_next_key(
                    (next.0, next.1),
                    store,
                    last,
                    high,
                    next.2,
                    floor,
                    &mut taken,
                )?;
            }
            Self::collect(store, lo, hi, reverse, limit, &mut fresh, what)?;
            if fresh == *hits {
                return Ok(());
            }
            std::mem::swap(hits, &mut fresh);
        })();
        self.s.hits_again = fresh;
        r
    }

    /// The one-pass form of [`Self::collect_locked`], for a forward scan of a B+-tree under
    /// record locking: collects the entries into `hits` and asks, conditionally and under
    /// the latch of the leaf holding each, for the lock on every entry's key and on the key
    /// after the range (the end of the index past the last entry; none where the scan
    /// stopped at `limit`), in lock space `space`, exclusively if `exclusive`
    /// ([`IndexStore::scan_to_next`](crate::table::IndexStore::scan_to_next)).
    /// `Some(true)`: every lock was granted, so the entries are final. `Some(false)`: one
    /// was refused (after that none is asked for); `hits` holds the entries for the caller
    /// to lock and check. `None`: nothing was collected, the scan is not of this kind.
    fn collect_once(
        &mut self,
        store: &crate::table::IndexStore,
        (lo, hi): ScanBounds<'_>,
        limit: usize,
        hits: &mut Hits,
        (space, exclusive): (u32, bool),
        floor: KeyRank,
    ) -> TxResult<Option<bool>> {
        let (Some(lm), Some(locks)) = (&self.db.locks, self.locks.as_mut()) else {
            return Ok(None);
        };
        if self.db.page_locking {
            return Ok(None);
        }
        let mode = if exclusive { LockMode::X } else { LockMode::S };
        let mut granted = true;
        let mut ask = |key: &[u8]| {
            granted = granted
                && lm
                    .try_lock_record(locks, space, key_hash(space, key), mode, floor)
                    .unwrap_or(false);
        };
        hits.clear();
        let lo = lo.1.map(|_| lo.0);
        let hi = hi.1.map(|_| hi.0);
        let scanned = store.scan_to_next(lo, hi, limit, |step| {
            match step {
                ScanStep::Entry(key, loc) => {
                    hits.push(key, loc);
                    ask(key);
                }
                ScanStep::After(key) => ask(key.unwrap_or(END_OF_INDEX)),
            }
            true
        })?;
        Ok(scanned.map(|_| granted))
    }

    /// Adds the index entries of the record at `loc` that `insert` just created: the
    /// primary key `k`, then every secondary index's entry, each after its next-key lock.
    /// `DuplicateKey` if an index holds the key already (the caller undoes the record).
    fn insert_entries(
        &mut self,
        table: &Table,
        k: &[u8],
        rec: &[u8],
        loc: u64,
        next_in_tree: bool,
    ) -> TxResult<()> {
        if self.db.page_locking {
            // No index entry names the record yet, so nobody can reach it before this
            // lock is granted; waiting here holds no latch.
            self.lock_page_of(table.id, loc, true)?;
        }
        let rank = insert_rank(self.db.locks.is_some(), &table.key, k);
        self.add_entry(
            &table.primary,
            (table.id, table.id),
            (k, rank),
            loc,
            next_in_tree,
        )
        .map_err(|e| Self::duplicate_in(e, &table.schema.name))?;
        let secondaries = table.secondaries.read();
        for ix in secondaries.iter() {
            let index = self.db.index_by_id(*ix)?;
            let mut entry = std::mem::take(&mut self.s.key2);
            let r = index
                .key
                .encode_record(&table.layout, rec, &mut entry)
                .and_then(|()| self.insert_secondary(table.id, index, &entry, loc, next_in_tree));
            self.s.key2 = entry;
            r.map_err(|e| Self::duplicate_in(e, &index.schema.name))?;
        }
        Ok(())
    }

    /// Names the index in a duplicate-key error from the storage layer.
    fn duplicate_in(e: TxError, name: &str) -> TxError {
        match e {
            TxError::Storage(storage::StorageError::DuplicateKey) => {
                TxError::DuplicateKey(name.to_string())
            }
            e => e,
        }
    }

    /// Adds a secondary index entry `entry → loc`, locking the entry and the key after it.
    fn insert_secondary(
        &mut self,
        table: u32,
        index: &Index,
        entry: &[u8],
        loc: u64,
        next_in_tree: bool,
    ) -> TxResult<()> {
        let space = crate::db::index_lock_space(index.id);
        // The whole gap below, as for the primary key (see `insert`).
        self.lock_key(space, entry, true, WHOLE_GAP)?;
        let rank = insert_rank(self.db.locks.is_some(), &index.key, entry);
        self.add_entry(
            &index.store,
            (space, table),
            (entry, rank),
            loc,
            next_in_tree,
        )
    }

    /// Adds `k → loc` to `store` with the key after it locked X in lock space `space` (the
    /// caller holds `k`'s own lock): in the insert's own descent on a B+-tree under record
    /// locking (`next_in_tree`), else after a scan for it. Without locks, just the insert.
    /// A duplicate is `TxError::Storage(DuplicateKey)`.
    fn add_entry(
        &mut self,
        store: &crate::table::IndexStore,
        (space, heap_table): (u32, u32),
        (k, rank): (&[u8], KeyRank),
        loc: u64,
        next_in_tree: bool,
    ) -> TxResult<()> {
        if self.db.locks.is_none() {
            if store.is_btree() {
                return Ok(store.insert_hinted(k, loc, self.s.leaf_hint(space))?);
            }
            return Ok(store.insert(k, loc)?);
        }
        if next_in_tree && store.is_btree() {
            return self.insert_entry_locked(store, space, (k, rank), loc);
        }
        self.lock_next_key(
            (space, heap_table),
            store,
            Some(k),
            Bound::Unbounded,
            true,
            rank,
            &mut None,
        )?;
        Ok(store.insert(k, loc)?)
    }

    /// Adds the entry `k → loc` to `store` (record locking), checking the key after it in
    /// the same descent (ARIES/IM): under the leaf latch X on the next key (or the end of
    /// the index), in lock space `space`, is asked for *conditionally and for an instant*:
    /// granted, nothing is kept (`k`'s own lock, which the caller holds to commit, guards the
    /// entry from then on, so a later scan or delete of the next key need not wait for this
    /// transaction: New-Order's insert at the end of one district's new orders and
    /// Delivery's lock on the next district's oldest did). Only holders whose floor is at or
    /// below `rank`, the new key's, count (`txn::lock::KeyRank`): a lock that guards the
    /// next key's own range, as a Delivery's on the next district's oldest does, lets an
    /// insert below that range go ahead. Refused, the tree lets go of every latch, this waits
    /// for the lock unconditionally and tries again (the next key may have changed
    /// meanwhile); the lock it waited for is let go once the entry is in (or the insert
    /// failed), unless the transaction held that key before, so it lasts no longer than the
    /// granted check's instant: a Delivery's scan of the next district would otherwise wait
    /// for this transaction's end. A duplicate is `TxError::Storage(DuplicateKey)`.
    fn insert_entry_locked(
        &mut self,
        store: &crate::table::IndexStore,
        space: u32,
        (k, rank): (&[u8], KeyRank),
        loc: u64,
    ) -> TxResult<()> {
        let (Some(lm), Some(locks)) = (&self.db.locks, self.locks.as_mut()) else {
            return Ok(store.insert(k, loc)?);
        };
        // The next key this insert waited for and did not hold before.
        let mut waited: Option<u64> = None;
        let r = loop {
            let mut refused = None;
            let hint = self.s.leaf_hint(space);
            let r = store.insert_with_next(k, loc, hint, |next| {
                let name = key_hash(space, next.unwrap_or(END_OF_INDEX));
                let granted = lm
                    .try_lock_record_instant(locks, space, name, LockMode::X, rank)
                    .unwrap_or(false);
                if !granted {
                    refused = Some(name);
                }
                granted
            });
            match r {
                Ok(InsertOutcome::Inserted) => break Ok(()),
                Err(e) => break Err(e.into()),
                Ok(InsertOutcome::Blocked) => {
                    let name = refused.expect("a refused next key");
                    let held_before = locks.mode_of(LockName::Record {
                        table: space,
                        key: name,
                    });
                    if let Err(e) = lm.lock_record(locks, space, name, LockMode::X, rank) {
                        break Err(TxError::Retry(e.to_string()));
                    }
                    // A second wait (the next key changed meanwhile) no longer needs the first.
                    if let Some(earlier) = waited.take() {
                        lm.release_record(locks, space, earlier);
                    }
                    if held_before.is_none() {
                        waited = Some(name);
                    }
                }
            }
        };
        if let Some(name) = waited {
            lm.release_record(locks, space, name);
        }
        r
    }

    /// Takes back the transaction's last change at once (a statement-level rollback of one
    /// step), logging its compensation as `rollback` does.
    fn undo_last(&mut self) -> TxResult<()> {
        self.s.found.forget();
        self.s.held.clear();
        let Some(e) = self.s.undo.entries.pop() else {
            return Ok(());
        };
        let before = self.s.undo.before(&e).to_vec();
        let op = UndoOp {
            kind: e.kind,
            table: e.table,
            loc: e.loc,
            offset: e.offset,
            before: &before,
        };
        let s = &mut **self.s;
        self.db.apply_undo(&op, &mut s.key, &mut s.rec)?;
        if self.db.log_records {
            let log = self.db.log.as_ref().unwrap();
            let cell = self.active.as_ref().map(|a| &a.last_lsn);
            self.last_lsn = log.append_compensation_publishing(
                self.id,
                self.last_lsn,
                Lsn(e.prev_lsn),
                &[],
                cell,
            );
        }
        Ok(())
    }

    /// Before a delete removes the record `rec`'s secondary index entries: locks each entry
    /// and the key after it exclusively, in the index's lock space. A scan of a secondary
    /// index locks the rows it returns, but the key after its range only in the index's space:
    /// a delete that removed that key without its lock would open the scan's gap to inserts
    /// (a phantom).
    fn lock_secondary_entries(&mut self, table: &Table, rec: &[u8]) -> TxResult<()> {
        // A copy: the list's latch must not be held while this waits for a lock.
        let secondaries = {
            let list = table.secondaries.read();
            if list.is_empty() {
                return Ok(());
            }
            list.clone()
        };
        let mut entry = std::mem::take(&mut self.s.key2);
        let r = secondaries.iter().try_for_each(|ix| {
            let index = self.db.index_by_id(*ix)?;
            let space = crate::db::index_lock_space(index.id);
            index.key.encode_record(&table.layout, rec, &mut entry)?;
            let floor = self.merged_floor(space, &entry, index.key.rank(&entry));
            self.lock_key(space, &entry, true, NO_GAP)?;
            self.lock_next_key(
                (space, table.id),
                &index.store,
                Some(&entry),
                Bound::Unbounded,
                true,
                floor,
                &mut None,
            )
        });
        self.s.key2 = entry;
        r
    }

    /// Locks the key that follows `after` (an entry), or without one the key that follows a
    /// range ending at `hi`, or the end of the index; so no insert of a key from `floor` up
    /// can slip a phantom into the gap before it until this transaction ends.
    ///
    /// `taken` carries a lock on a next key that an earlier call for the same statement took
    /// (one the transaction did not hold before: the call added it to the held locks), and
    /// comes back naming the one this call took that way. A next key that stops being next, because a key arrived in the gap
    /// while this waited for its lock, guards nothing any more: the new one guards the gap up
    /// to it. That lock is let go before this waits for the new one. Kept, it deadlocked: a
    /// TPC-C Stock-Level's scan, granted the next district's first order line after a
    /// New-Order's first line had gone in before it, waited for that line still holding the
    /// first one, which the New-Order's second line needed as its next key.
    #[allow(clippy::too_many_arguments)]
    fn lock_next_key(
        &mut self,
        (lock_table, heap_table): (u32, u32),
        store: &crate::table::IndexStore,
        after: Option<&[u8]>,
        hi: Bound<&[u8]>,
        exclusive: bool,
        floor: KeyRank,
        taken: &mut Option<u64>,
    ) -> TxResult<()> {
        if self.db.locks.is_none() {
            return Ok(());
        }
        let mut next: Option<(Vec<u8>, u64)> = None;
        let lo = match (after, hi) {
            (Some(a), _) => Bound::Excluded(a),
            (None, Bound::Included(h)) => Bound::Excluded(h),
            (None, Bound::Excluded(h)) => Bound::Included(h),
            (None, Bound::Unbounded) => {
                return self.lock_next_key_named(lock_table, END_OF_INDEX, exclusive, floor, taken)
            }
        };
        // Record locking: the next key is locked conditionally while its leaf is latched
        // (as an insert asks for its next key's, `insert_entry_locked`). Granted there, it is the
        // next key for good: an insert into the gap needs it exclusively, a delete of it
        // needs it at all. Refused, or page locking, or no key after: the loop below.
        let mut granted = None;
        let mut conditional = match (&self.db.locks, self.locks.as_mut()) {
            (Some(lm), Some(locks)) if !self.db.page_locking => Some((lm, locks)),
            _ => None,
        };
        let mode = if exclusive { LockMode::X } else { LockMode::S };
        store.scan(lo, Bound::Unbounded, false, 1, |k, loc| {
            if let Some((lm, locks)) = conditional.as_mut() {
                let name = key_hash(lock_table, k);
                let held = locks.held().len();
                if lm
                    .try_lock_record(locks, lock_table, name, mode, floor)
                    .unwrap_or(false)
                {
                    granted = Some((name, locks.held().len() > held));
                }
            }
            if granted.is_none() {
                next = Some((k.to_vec(), loc));
            }
            false
        })?;
        if let Some((name, new)) = granted {
            self.let_go_of_stale_next_key(lock_table, taken, name);
            if new {
                *taken = Some(name);
            }
            return Ok(());
        }
        // The key is read under latches and locked after: a key that arrived in between is
        // the true next key, so look again after locking until the locked one is still next.
        loop {
            match &next {
                Some((k, loc)) => {
                    self.lock_next_key_named(lock_table, k, exclusive, floor, taken)?;
                    // Page locking: scans lock their entries' heap pages, not their keys, so
                    // the next key's guard is its record's page too. (Without it an insert
                    // between two scanned entries locked only the later one's name, and went
                    // unseen unless its record happened to land on a page the scan held.)
                    if self.db.page_locking {
                        self.lock_page_of(heap_table, *loc, exclusive)?;
                    }
                }
                None => {
                    self.lock_next_key_named(lock_table, END_OF_INDEX, exclusive, floor, taken)?
                }
            }
            let mut now: Option<(Vec<u8>, u64)> = None;
            store.scan(lo, Bound::Unbounded, false, 1, |k, loc| {
                now = Some((k.to_vec(), loc));
                false
            })?;
            if now == next {
                return Ok(());
            }
            next = now;
        }
    }

    /// [`Self::lock_next_key`]'s unconditional request for the key `k` of lock space `space`:
    /// first lets go of the stale next key in `taken` (if it is another), then records `k`'s
    /// lock there if the transaction did not hold it before.
    fn lock_next_key_named(
        &mut self,
        space: u32,
        k: &[u8],
        exclusive: bool,
        floor: KeyRank,
        taken: &mut Option<u64>,
    ) -> TxResult<()> {
        let name = key_hash(space, k);
        self.let_go_of_stale_next_key(space, taken, name);
        let held = |this: &Self| this.locks.as_ref().map_or(0, |l| l.held().len());
        let before = held(self);
        self.lock_key(space, k, exclusive, floor)?;
        // A lock held before (or an upgrade of one) adds no entry.
        if held(self) > before {
            *taken = Some(name);
        }
        Ok(())
    }

    /// Lets go of the next-key lock named in `taken` unless it is `next`, the key now next
    /// (see [`Self::lock_next_key`]). Not under page locking, whose next key's page lock
    /// stays with it.
    fn let_go_of_stale_next_key(&mut self, space: u32, taken: &mut Option<u64>, next: u64) {
        if *taken == Some(next) || self.db.page_locking {
            return;
        }
        if let (Some(stale), Some(lm), Some(locks)) =
            (taken.take(), &self.db.locks, self.locks.as_mut())
        {
            lm.release_record(locks, space, stale);
        }
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if !self.finished {
            // Rollback failures here can only be storage errors; the database reports them
            // through its next operation, and recovery repairs the state after a restart.
            let _ = self.rollback();
            self.finish();
        }
        // SAFETY: `s` is not used after this, the transaction's last use of it; `drop` runs
        // once.
        let s = unsafe { ManuallyDrop::take(&mut self.s) };
        Self::keep_session(s);
    }
}

impl Tx for Transaction<'_> {
    fn get(
        &mut self,
        t: &TableRef,
        key: &[Value],
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> TxResult<Option<Row>> {
        let table = self.table(t)?;
        Self::check_fetch(table, fetch)?;
        let mark = self.short_read_mark(for_update);
        let mut k = std::mem::take(&mut self.s.key);
        let r = (|| {
            table.key.encode(key, &mut k)?;
            let Some(loc) = self.find_locked_keeping(table, &k, for_update, true)? else {
                return Ok(None);
            };
            let project = |rec: &[u8]| Self::project(&table.layout, rec, fetch);
            Ok(match table.is_read_only() {
                true => table.records.with_unchanging(loc, project)?,
                false => table.records.with(loc, project)?,
            })
        })();
        self.s.key = k;
        self.end_short_read(mark);
        r
    }

    /// [`Tx::update_with`]: the record is read in place, so naming the columns saves nothing.
    fn update_columns_with(
        &mut self,
        t: &TableRef,
        key: &[Value],
        _columns: &[usize],
        f: &mut UpdateFn<'_>,
    ) -> TxResult<bool> {
        self.update_with(t, key, f)
    }

    /// [`Tx::read_with`]: the record is read in place, so naming the columns saves nothing.
    fn read_columns_with(
        &mut self,
        t: &TableRef,
        key: &[Value],
        _columns: &[usize],
        for_update: bool,
        f: &mut ReadFn<'_>,
    ) -> TxResult<bool> {
        self.read_with(t, key, for_update, f)
    }

    fn read_with(
        &mut self,
        t: &TableRef,
        key: &[Value],
        for_update: bool,
        f: &mut ReadFn<'_>,
    ) -> TxResult<bool> {
        let table = self.table(t)?;
        let mark = self.short_read_mark(for_update);
        let mut k = std::mem::take(&mut self.s.key);
        let r = (|| {
            table.key.encode(key, &mut k)?;
            let Some(loc) = self.find_locked_keeping(table, &k, for_update, true)? else {
                return Ok(false);
            };
            let read = |rec: &[u8]| f(RowRef::record(&table.layout, rec));
            let found = match table.is_read_only() {
                true => table.records.with_unchanging(loc, read)?,
                false => table.records.with(loc, read)?,
            };
            match found {
                Some(read) => read.map(|()| true),
                None => Ok(false),
            }
        })();
        self.s.key = k;
        self.end_short_read(mark);
        r
    }

    fn update(&mut self, t: &TableRef, key: &[Value], set: &[(usize, Value)]) -> TxResult<bool> {
        self.update_row(t, key, Changes::Given(set))
    }

    /// In two passes over the rows, each issuing every load before waiting for any: first
    /// the index slots, then (each slot found) the records. Only main-memory integer indexes
    /// take part (see `IndexStore::prefetch_int`); on the buffer pool a lookup is a descent
    /// under latches, which a hint should not pay for twice (measured: see
    /// `docs/performance.md`).
    fn prefetch(&mut self, rows: &[(&TableRef, &[i64])]) {
        self.prefetch_found(rows, |table, loc| {
            table.records.prefetch(loc, table.layout.record_size())
        });
    }

    /// [`Tx::prefetch`], loading of each record only the lines that hold `columns`.
    fn prefetch_columns(&mut self, rows: &[(&TableRef, &[i64])], columns: &[usize]) {
        self.prefetch_found(rows, |table, loc| {
            table.records.prefetch_columns(loc, &table.layout, columns)
        });
    }

    /// As [`Tx::prefetch`] or [`Tx::prefetch_columns`]: embedded, a hint locks nothing.
    fn prefetch_for_update(&mut self, rows: &[(&TableRef, &[i64])], columns: Option<&[usize]>) {
        match columns {
            Some(columns) => self.prefetch_columns(rows, columns),
            None => self.prefetch(rows),
        }
    }

    /// The first pass of [`Tx::prefetch`] alone: an insert has no record to load, and a probe
    /// would only cost instructions (and read the slot's memory before the insert writes it).
    fn prefetch_inserts(&mut self, rows: &[(&TableRef, &[i64])]) {
        if !self.db.prefetch {
            return;
        }
        for (t, key) in rows {
            self.prefetch_slot(t, key);
        }
    }

    fn update_with(&mut self, t: &TableRef, key: &[Value], f: &mut UpdateFn<'_>) -> TxResult<bool> {
        self.update_row(t, key, Changes::Computed(f))
    }

    fn insert(&mut self, t: &TableRef, row: &[Value]) -> TxResult<()> {
        let table = self.table(t)?;
        let mut k = std::mem::take(&mut self.s.key);
        let mut rec = std::mem::take(&mut self.s.rec);
        let r = (|| {
            table.layout.encode(row, &mut rec)?;
            table.key.encode_record(&table.layout, &rec, &mut k)?;
            // The new key's lock guards the whole gap below it, not the key alone: the
            // entry splits the gap the key after it guarded, and where this transaction's
            // own lock on that key guarded the lower part for a scan of its own, the new
            // entry's lock now must (an insert by another into that part finds this key as
            // its next, not the one the scan locked).
            self.lock_key(table.id, &k, true, WHOLE_GAP)?;
            self.writable(table)?;
            // Record locking: the next key is locked while the primary insert holds the
            // leaf latch (`insert_entry_locked`), one descent for both; page locking locks it
            // after a scan (`add_entry`). Either way a duplicate is reported by the index
            // insert itself, and the record is taken back below.
            let next_in_tree = self.db.locks.is_some() && !self.db.page_locking;
            let prev = self.last_lsn;
            let loc = {
                let (db, id, active) = (self.db, self.id, self.active.as_deref());
                let mut held = None;
                let inserted = table.records.insert(&rec, |loc| {
                    let op = UndoOp {
                        kind: KIND_INSERT,
                        table: table.id,
                        loc,
                        offset: 0,
                        before: &[],
                    };
                    // SAFETY: settled below, whatever the insert's outcome.
                    held = unsafe { Self::hold_undo(db, id, prev, active, op) };
                });
                if let Some(held) = held {
                    self.last_lsn = held.settle();
                }
                inserted?
            };
            self.s.undo.push(KIND_INSERT, table.id, loc, 0, &[], prev.0);
            let entries = self.insert_entries(table, &k, &rec, loc, next_in_tree);
            if let Err(TxError::DuplicateKey(_)) = entries {
                // Found only now that the record is stored (the index insert is the check):
                // take the insert back at once, so a transaction that goes on and commits
                // leaves no record behind.
                self.undo_last()?;
            }
            entries
        })();
        self.s.key = k;
        self.s.rec = rec;
        r
    }

    fn delete(&mut self, t: &TableRef, key: &[Value]) -> TxResult<bool> {
        let table = self.table(t)?;
        let mut k = std::mem::take(&mut self.s.key);
        let mut rec = std::mem::take(&mut self.s.rec);
        let r = (|| {
            let Some(loc) = self.locked_copy(table, key, &mut k, &mut rec)? else {
                return Ok(false);
            };
            self.s.found.drop_key(table.id, &k);
            self.s.held.drop_key(table.id, &k);
            if self.db.locks.is_some() {
                // Next-key lock: a scan of this gap must wait until the delete is decided,
                // and so must an insert between the two keys (a scan ending at it would
                // read past the removed key unawares); one below the removed key need not,
                // unless this transaction's own lock on the key guarded the gap below it (see
                // `merged_floor`).
                let floor = self.merged_floor(table.id, &k, table.key.rank(&k));
                self.lock_next_key(
                    (table.id, table.id),
                    &table.primary,
                    Some(&k),
                    Bound::Unbounded,
                    true,
                    floor,
                    &mut None,
                )?;
                self.lock_secondary_entries(table, &rec)?;
            }
            let prev = self.last_lsn;
            let op = UndoOp {
                kind: KIND_DELETE,
                table: table.id,
                loc,
                offset: 0,
                before: &rec,
            };
            let active = self.active.as_deref();
            // SAFETY: settled below, whatever the index removal's outcome.
            let held = unsafe { Self::hold_undo(self.db, self.id, prev, active, op) };
            self.s
                .undo
                .push(KIND_DELETE, table.id, loc, 0, &rec, prev.0);
            let removed = self.db.remove_entries(table, &rec, loc, &mut self.s.key2);
            if let Some(held) = held {
                self.last_lsn = held.settle();
            }
            removed?;
            self.s.deleted.push((table.id, loc));
            Ok(true)
        })();
        self.s.key = k;
        self.s.rec = rec;
        r
    }

    fn scan(
        &mut self,
        t: &TableRef,
        range: KeyRange<'_>,
        limit: Option<usize>,
        reverse: bool,
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> TxResult<Vec<Row>> {
        Self::check_fetch(self.table(t)?, fetch)?;
        let mut rows = Vec::new();
        self.scan_records(
            t,
            range,
            limit,
            reverse,
            for_update,
            |layout, rec, found| {
                if rows.is_empty() {
                    rows.reserve_exact(found);
                }
                rows.push(Self::project(layout, rec, fetch));
                Ok(())
            },
        )?;
        Ok(rows)
    }

    /// [`Tx::scan`] reading each record in place: nothing is copied out.
    fn scan_columns_with(
        &mut self,
        t: &TableRef,
        range: KeyRange<'_>,
        limit: Option<usize>,
        reverse: bool,
        _columns: &[usize],
        for_update: bool,
        f: &mut ReadFn<'_>,
    ) -> TxResult<()> {
        self.scan_records(t, range, limit, reverse, for_update, |layout, rec, _| {
            f(RowRef::record(layout, rec))
        })
    }

    /// [`Tx::scan_table_with`]: a heap table under a shared lock on the whole table (no
    /// writer holds its intention lock, so the heap holds committed rows only), its records
    /// read in place a page after another; a main-memory table in key order.
    fn scan_table_with(
        &mut self,
        t: &TableRef,
        columns: &[usize],
        f: &mut ReadFn<'_>,
    ) -> TxResult<()> {
        let table = self.table(t)?;
        let Records::Heap(heap) = &table.records else {
            return self.scan_columns_with(t, KeyRange::all(), None, false, columns, false, f);
        };
        if let (Some(lm), Some(locks)) = (&self.db.locks, self.locks.as_mut()) {
            lm.lock_table(locks, table.id, LockMode::S)
                .map_err(|e| TxError::Retry(e.to_string()))?;
        }
        let mut failed = None;
        heap.scan(|_, rec| match f(RowRef::record(&table.layout, rec)) {
            Ok(()) => true,
            Err(e) => {
                failed = Some(e);
                false
            }
        })?;
        failed.map_or(Ok(()), Err)
    }

    fn scan_index(
        &mut self,
        ix: &IndexRef,
        range: KeyRange<'_>,
        limit: Option<usize>,
        reverse: bool,
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> TxResult<Vec<Row>> {
        let index: &Index = self.db.resolve_index(ix)?;
        let table = self.db.table_by_id(index.table)?;
        Self::check_fetch(table, fetch)?;
        let limit = limit.unwrap_or(usize::MAX);
        let mark = self.short_read_mark(for_update);
        // Index entries are locked in the index's own lock space (table id range above tables).
        let index_lock = crate::db::index_lock_space(index.id);
        // The bounds, each entry's primary key and the entry a record carries are encoded
        // into the session's buffers (nothing below uses them).
        let mut lo = std::mem::take(&mut self.s.key);
        let mut hi = std::mem::take(&mut self.s.key2);
        let mut pk = std::mem::take(&mut self.s.rec);
        let mut check = std::mem::take(&mut self.s.after);
        let mut hits = std::mem::take(&mut self.s.hits);
        let r = (|| {
            lo.clear();
            hi.clear();
            let lob = index.key.low_bound(range.low, &mut lo)?;
            let hib = index.key.high_bound(range.high, &mut hi)?;
            let floor = scan_floor(self.db.locks.is_some(), &index.key, (&lo, lob));
            self.collect_locked(
                &index.store,
                ((&lo, lob), (&hi, hib)),
                reverse,
                limit,
                &mut hits,
                &index.schema.name,
                ((index_lock, table.id, for_update), floor),
                |this, entry, loc, key_locked, floor| {
                    if !key_locked {
                        this.lock_key(index_lock, entry, for_update, floor)?;
                    }
                    // Lock the row by its primary key; it is confirmed below.
                    let Some(()) = table.records.with(loc, |rec| {
                        let _ = table.key.encode_record(&table.layout, rec, &mut pk);
                    })?
                    else {
                        return Ok(());
                    };
                    if this.db.page_locking {
                        this.lock_page_of(table.id, loc, for_update)
                    } else {
                        this.lock_key(table.id, &pk, for_update, NO_GAP)
                    }
                },
            )?;
            let mut rows = Vec::with_capacity(hits.len());
            for (entry, loc) in hits.iter() {
                // The record must still carry this entry.
                let row = table.records.with(loc, |rec| {
                    let _ = index.key.encode_record(&table.layout, rec, &mut check);
                    if entry.starts_with(&check) {
                        Some(Self::project(&table.layout, rec, fetch))
                    } else {
                        None
                    }
                })?;
                if let Some(Some(row)) = row {
                    rows.push(row);
                }
            }
            Ok(rows)
        })();
        self.s.hits = hits;
        self.s.key = lo;
        self.s.key2 = hi;
        self.s.rec = pk;
        self.s.after = check;
        self.end_short_read(mark);
        r
    }

    fn read_committed(&mut self) {
        self.read_committed = self.db.read_committed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::DbConfig;
    use crate::schema::TableSchema;
    use crate::switches::{Preset, Switches};
    use crate::table::Records;

    /// The buffers' address of the session this thread keeps, if it keeps one.
    fn kept_session() -> Option<(*const u8, usize)> {
        SESSION.with(|c| {
            c.borrow()
                .as_ref()
                .map(|s| (s.undo.arena.as_ptr(), s.retained_bytes()))
        })
    }

    /// The full engine in memory (`xactions` on).
    fn full_db() -> Arc<Database> {
        Database::open(DbConfig {
            switches: Switches::preset(Preset::Full),
            pool_mib: 64,
            ..DbConfig::default()
        })
        .unwrap()
    }

    /// A transaction takes its active-transaction entry from the thread's session, as the last
    /// one left it, unless someone else still holds that entry.
    #[test]
    fn a_thread_reuses_its_active_transaction_entry() {
        let db = full_db();
        let tx = db.begin().unwrap();
        let first = Arc::as_ptr(tx.active.as_ref().unwrap());
        let first_id = tx.id();
        tx.commit().unwrap();
        let tx = db.begin().unwrap();
        let entry = tx.active.as_ref().unwrap();
        assert_eq!(Arc::as_ptr(entry), first, "the same entry");
        assert_eq!(entry.id.0, tx.id());
        assert_ne!(tx.id(), first_id);
        assert_eq!(entry.last_lsn.load(Ordering::Relaxed), 0, "renewed");
        assert!(!entry.committed.load(Ordering::Relaxed), "renewed");
        // Held elsewhere when the transaction ends, the entry is not renewed under its holder.
        let held = Arc::clone(entry);
        tx.commit().unwrap();
        let tx = db.begin().unwrap();
        assert_ne!(Arc::as_ptr(tx.active.as_ref().unwrap()), Arc::as_ptr(&held));
        assert_ne!(held.id.0, tx.id(), "the holder's entry kept its id");
        tx.abort().unwrap();
        assert_eq!(db.running_transactions(), 0);
    }

    /// The full engine (`xactions` on) reuses the thread's session: the next transaction
    /// finds the same buffers. One whose undo list outgrew the bound is not kept.
    #[test]
    fn a_thread_keeps_its_session_unless_a_transaction_grew_it_large() {
        let db = full_db();
        assert!(db.xactions);
        let t = db
            .create_table(
                TableSchema::new("t")
                    .int("id")
                    .string("v", 512)
                    .key(&["id"]),
            )
            .unwrap();
        let row = |id: i64| [Value::Int(id), Value::Str("x".repeat(500))];
        db.run(|tx| tx.insert(&t, &row(0))).unwrap();
        let (arena, kept) = kept_session().expect("kept after a commit");
        assert!(kept <= MAX_KEPT_SESSION_BYTES);
        db.run(|tx| tx.insert(&t, &row(1))).unwrap();
        assert_eq!(kept_session().map(|k| k.0), Some(arena), "the same buffers");
        for chunk in (2..3_000).collect::<Vec<i64>>().chunks(100) {
            db.run(|tx| chunk.iter().try_for_each(|&id| tx.insert(&t, &row(id))))
                .unwrap();
        }
        // One transaction rewrites them all: 3,000 before images of 500 bytes take the undo
        // list's arena past 1 MiB.
        let mut tx = db.begin().unwrap();
        assert!(kept_session().is_none(), "taken by the running transaction");
        for id in 0..3_000 {
            let set = [(1, Value::Str("y".repeat(500)))];
            assert!(tx.update(&t, &[Value::Int(id)], &set).unwrap());
        }
        assert!(tx.s.retained_bytes() > MAX_KEPT_SESSION_BYTES);
        tx.commit().unwrap();
        assert!(kept_session().is_none(), "a grown session is not kept");
        db.run(|tx| tx.insert(&t, &row(5_000))).unwrap();
        assert!(kept_session().is_some(), "a fresh one is kept again");
    }

    /// Records in a table's heap, reachable from an index or not.
    fn heap_records(db: &Database, t: &crate::api::TableRef) -> usize {
        let Records::Heap(h) = &db.resolve_table(t).unwrap().records else {
            panic!("the full preset keeps records in a heap file");
        };
        let mut n = 0;
        h.scan(|_, _| {
            n += 1;
            true
        })
        .unwrap();
        n
    }

    /// With record locking the duplicate shows up only after the record went into the heap
    /// (one descent locks the next key and inserts): the insert is undone at once, so a
    /// transaction that goes on and commits leaves no record that no index names.
    #[test]
    fn duplicate_insert_then_commit_leaves_no_orphan_record() {
        for threads in [1, 2] {
            let db = Database::open(DbConfig {
                switches: Switches::preset(Preset::Full),
                threads,
                pool_mib: 16,
                ..DbConfig::default()
            })
            .unwrap();
            let t = db
                .create_table(
                    TableSchema::new("t")
                        .int("id")
                        .int("v")
                        .key(&["id"])
                        .int_key(&[32]),
                )
                .unwrap();
            assert!(db.locks.is_some() && !db.page_locking, "record locking");
            let row = |id: i64, v: i64| [Value::Int(id), Value::Int(v)];
            db.run(|tx| (0..5).try_for_each(|i| tx.insert(&t, &row(i, i))))
                .unwrap();
            assert_eq!(heap_records(&db, &t), 5);
            let mut tx = db.begin().unwrap();
            tx.insert(&t, &row(10, 10)).unwrap();
            assert!(matches!(
                tx.insert(&t, &row(3, 99)),
                Err(TxError::DuplicateKey(_))
            ));
            assert_eq!(tx.s.undo.entries.len(), 1, "the duplicate's undo is gone");
            tx.insert(&t, &row(11, 11)).unwrap();
            tx.commit().unwrap();
            assert_eq!(heap_records(&db, &t), 7, "no orphan record");
            let v = db
                .run(|tx| tx.get(&t, &[Value::Int(3)], crate::api::Fetch::All, false))
                .unwrap();
            assert_eq!(v, Some(vec![Value::Int(3), Value::Int(3)]));
            db.check_invariants().unwrap();

            // A unique secondary index's duplicate comes after both the heap record and the
            // primary entry: all of them go.
            db.create_index(crate::schema::IndexSchema {
                name: "t_v".into(),
                table: "t".into(),
                columns: vec![1],
                unique: true,
                kind: Default::default(),
                int_key_bits: None,
            })
            .unwrap();
            let mut tx = db.begin().unwrap();
            assert!(matches!(
                tx.insert(&t, &row(20, 4)),
                Err(TxError::DuplicateKey(_))
            ));
            tx.commit().unwrap();
            assert_eq!(heap_records(&db, &t), 7, "no orphan record");
            let gone = db
                .run(|tx| tx.get(&t, &[Value::Int(20)], crate::api::Fetch::All, false))
                .unwrap();
            assert_eq!(gone, None, "no orphan primary entry");
            db.run(|tx| tx.insert(&t, &row(20, 20))).unwrap();
            db.check_invariants().unwrap();
        }
    }
}
