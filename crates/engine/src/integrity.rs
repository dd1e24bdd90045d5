//! Integrity verification: does the database on disk hold what its catalog says, intact?
//!
//! [`Database::verify_integrity`] reads everything once and reports every fault it finds by
//! place (up to a limit, then only counts them), in four passes:
//!
//! ```text
//!   1. pages      every page of the page file: checksum, magic, stored page id, kind
//!   2. structures every table's heap (HeapFile::verify) and every B+-tree (BTree::verify),
//!                 from the first page / root the catalog names; each page they reach is
//!                 claimed, and a page claimed twice is a fault
//!   3. agreement  per table whose structures are sound: every live record has its primary
//!                 and secondary entries, every entry names a live record with its key (by
//!                 sums of the (key, record) pairs' hashes first; by lookups, which name each
//!                 fault, only where the sums differ)
//!   4. coverage   pages no structure reaches are counted (a crash between allocating a page
//!                 and linking it leaves such pages, as does a B+-tree leaf emptied by deletes
//!                 and taken out of its tree, until an allocation takes its page again; they
//!                 are not a fault), the unlinked leaves among them apart
//! ```
//!
//! A page that fails pass 1 is reported once, with the structures that reach it named in its
//! place. Hash indexes live in memory only and are not verified. The passes read through the
//! buffer pool and write nothing: run them while no transaction runs.

use std::collections::HashMap;
use std::fmt;
use std::ops::Bound;
use std::path::Path;

use storage::heap::RecordId;
use storage::{BufferPool, Fault, FilePageStore, PageId, PageSize, PoolConfig};

use crate::api::{TxError, TxResult};
use crate::db::{Database, CATALOG_FILE, PAGE_FILE};
use crate::table::{IndexStore, Records, Table};

/// One fault, by place: "table stock, heap", "index customer_name", "page file".
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct IntegrityFault {
    /// The structure (table or index) the fault lies in, and the page.
    pub place: String,
    /// What is wrong there.
    pub detail: String,
}

impl fmt::Display for IntegrityFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.place, self.detail)
    }
}

/// What [`Database::verify_integrity`] verified and found (serialized as `glass check --json`
/// writes it).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct IntegrityReport {
    /// Pages in the page file (page 0, the meta page, included), each read and verified.
    pub pages: u64,
    /// Heap files walked and the pages of their chains.
    pub heaps: usize,
    pub heap_pages: usize,
    /// Records found in the heaps.
    pub records: usize,
    /// B+-trees walked (primary and secondary indexes) and their pages.
    pub trees: usize,
    pub tree_pages: usize,
    /// Leaves of those B+-trees that hold no entry.
    pub empty_leaves: usize,
    /// Index entries checked against the records they name.
    pub entries: usize,
    /// Pages (besides page 0) that no structure reaches.
    pub unreached_pages: u64,
    /// Of those, B+-tree leaves taken out of their trees and not allocated since: the next
    /// allocations take them (also after a restart).
    pub unlinked_leaves: u64,
    /// The first faults found, at most the limit given.
    pub faults: Vec<IntegrityFault>,
    /// Every fault found, including those past the limit.
    pub faults_total: usize,
    /// Only the pages were verified ([`verify_page_file`]): the structure counts are zero.
    pub pages_only: bool,
}

impl IntegrityReport {
    /// No fault found.
    pub fn is_clean(&self) -> bool {
        self.faults_total == 0
    }

    /// Puts a fault found outside the passes (the database would not open) in front.
    pub fn add_first(&mut self, place: String, detail: String) {
        self.faults_total += 1;
        self.faults.insert(0, IntegrityFault { place, detail });
    }

    fn add(&mut self, limit: usize, place: String, detail: String) {
        self.faults_total += 1;
        if self.faults.len() < limit {
            self.faults.push(IntegrityFault { place, detail });
        }
    }
}

/// How far a verification has got, as [`Database::verify_integrity_with_progress`] reports
/// it now and then (each pass and table from its start to its end); its `Display` is a line
/// for a user.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntegrityStep<'a> {
    /// Pass 1: `done` of the page file's `total` pages read and verified.
    Pages { done: u64, total: u64 },
    /// Pass 2: `table`'s heap and B+-trees, the `n`th of `tables` (from 1); `pages` of them
    /// walked so far.
    Structures {
        table: &'a str,
        n: usize,
        tables: usize,
        pages: u64,
    },
    /// Pass 3: `table`'s records and index entries, the `n`th of `tables` (from 1); `done`
    /// records and entries compared so far.
    Agreement {
        table: &'a str,
        n: usize,
        tables: usize,
        done: u64,
    },
}

impl fmt::Display for IntegrityStep<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            IntegrityStep::Pages { done, total } => write!(
                f,
                "verifying pages: {done} of {total} ({:.0}%)",
                done as f64 * 100.0 / total.max(1) as f64
            ),
            IntegrityStep::Structures {
                table,
                n,
                tables,
                pages,
            } => write!(
                f,
                "verifying heaps and B+-trees: table {table} ({n} of {tables}), {pages} pages \
                 walked"
            ),
            IntegrityStep::Agreement {
                table,
                n,
                tables,
                done,
            } => write!(
                f,
                "verifying indexes against records: table {table} ({n} of {tables}), \
                 {done} compared"
            ),
        }
    }
}

/// Pages read, and records or entries compared, between two reports of progress.
const PROGRESS_EVERY: u64 = 4096;

/// Pass 2 reports every this many pages walked: a page there costs more than a comparison.
pub const PROGRESS_PAGES_WALKED: u64 = 256;

/// The state of one verification.
struct Verifier<'a> {
    db: &'a Database,
    progress: &'a dyn Fn(IntegrityStep<'_>),
    limit: usize,
    report: IntegrityReport,
    /// Pages that failed pass 1, with the index of their fault (if it was kept).
    bad_pages: HashMap<PageId, Option<usize>>,
    /// Which structure reached each page.
    owners: HashMap<PageId, String>,
}

impl Database {
    /// Verifies the integrity of the database on disk (see the module docs): every page, every
    /// heap and B+-tree, the indexes against their tables, the catalog against the page file.
    /// Keeps the first `fault_limit` faults and counts the rest. An in-memory database
    /// (`page-access=off`) has nothing on pages to verify and reports nothing.
    ///
    /// Reads only; run it while no transaction runs.
    pub fn verify_integrity(&self, fault_limit: usize) -> IntegrityReport {
        self.verify_integrity_with_progress(fault_limit, &|_| {})
    }

    /// [`Database::verify_integrity`], telling `progress` now and then how far it has got
    /// (every few thousand pages, records or entries, and at each table): a database of
    /// gigabytes takes tens of seconds to verify.
    pub fn verify_integrity_with_progress(
        &self,
        fault_limit: usize,
        progress: &dyn Fn(IntegrityStep<'_>),
    ) -> IntegrityReport {
        let mut v = Verifier {
            db: self,
            progress,
            limit: fault_limit,
            report: IntegrityReport::default(),
            bad_pages: HashMap::new(),
            owners: HashMap::new(),
        };
        if self.pool.is_none() {
            return v.report;
        }
        v.verify_pages();
        let tables: Vec<&Table> = self.tables.iter().filter_map(|t| t.get()).collect();
        let count = tables.len();
        let mut sound = Vec::with_capacity(count);
        for (i, table) in tables.iter().enumerate() {
            sound.push(v.verify_structures(table, (i + 1, count)));
        }
        for (i, (table, sound)) in tables.into_iter().zip(sound).enumerate() {
            if sound {
                v.verify_agreement(table, (i + 1, count));
            }
        }
        let pages = v.report.pages;
        let unreached: Vec<PageId> = (1..pages)
            .map(PageId)
            .filter(|p| !v.owners.contains_key(p))
            .collect();
        v.report.unreached_pages = unreached.len() as u64;
        if let Some(pool) = &self.pool {
            v.report.unlinked_leaves =
                storage::btree::unlinked_leaves(pool, unreached).len() as u64;
        }
        v.report
    }
}

impl Verifier<'_> {
    /// Pass 1: every page of the page file.
    fn verify_pages(&mut self) {
        if let Some(pool) = &self.db.pool {
            verify_pages(
                pool,
                self.limit,
                &mut self.report,
                &mut self.bad_pages,
                self.progress,
            );
        }
    }

    /// Pass 2 for one table, the `n`th of `tables`: its heap, its primary index and its
    /// secondary indexes. Whether all of them are free of faults.
    fn verify_structures(&mut self, table: &Table, (n, tables): (usize, usize)) -> bool {
        let name = &table.schema.name;
        let progress = self.progress;
        let step = |pages| IntegrityStep::Structures {
            table: name,
            n,
            tables,
            pages,
        };
        progress(step(0));
        let mut walked: u64 = 0;
        let mut tick = || {
            walked += 1;
            if walked.is_multiple_of(PROGRESS_PAGES_WALKED) {
                progress(step(walked));
            }
        };
        let mut sound = true;
        if let Records::Heap(heap) = &table.records {
            let check = heap.verify_with_progress(&mut tick);
            self.report.heaps += 1;
            self.report.heap_pages += check.pages.len();
            self.report.records += check.records;
            let place = format!("table {name}, heap");
            sound &= self.claim(&place, &check.pages);
            if check.faults.is_empty() {
                // The map the open built (or took as saved at the checkpoint) against the pages.
                let faults = heap.free_space_faults(&check.pages, &check.free);
                sound &= self.faults(&format!("table {name}, heap's free-space map"), faults);
            }
            sound &= self.faults(&place, check.faults);
        }
        let primary = format!("table {name}, primary index");
        sound &= self.verify_index(&primary, &table.primary, &mut tick);
        for id in table.secondaries.read().iter() {
            if let Ok(index) = self.db.index_by_id(*id) {
                let place = format!("index {}", index.schema.name);
                sound &= self.verify_index(&place, &index.store, &mut tick);
            }
        }
        progress(step(walked));
        sound
    }

    /// Walks one index store if it is a B+-tree, calling `walked` for each page; whether it
    /// is free of faults.
    fn verify_index(&mut self, place: &str, store: &IndexStore, walked: &mut dyn FnMut()) -> bool {
        let check = match store {
            IndexStore::Generic(tree) => tree.verify_with_progress(walked),
            IndexStore::Int(tree) => tree.verify_with_progress(walked),
            _ => return true,
        };
        self.report.trees += 1;
        self.report.tree_pages += check.pages.len();
        self.report.empty_leaves += check.empty_leaves;
        let claimed = self.claim(place, &check.pages);
        self.faults(place, check.faults) && claimed
    }

    /// Records that `owner` reaches `pages`; a fault for each page another structure reached
    /// already. Whether there was none.
    fn claim(&mut self, owner: &str, pages: &[PageId]) -> bool {
        let mut sound = true;
        for &page in pages {
            if let Some(other) = self.owners.get(&page) {
                let detail = format!("page {page} is claimed by {other} as well");
                self.report.add(self.limit, owner.to_string(), detail);
                sound = false;
            } else {
                self.owners.insert(page, owner.to_string());
            }
        }
        sound
    }

    /// Reports a structure's faults in its place; a fault on a page that failed pass 1
    /// instead names the structure in that page's fault. Whether there were none.
    fn faults(&mut self, place: &str, faults: Vec<Fault>) -> bool {
        let sound = faults.is_empty();
        for fault in faults {
            match self.bad_pages.get(&fault.page) {
                Some(Some(i)) => {
                    let kept = &mut self.report.faults[*i];
                    if !kept.place.contains(place) {
                        kept.place.push_str(&format!(" (in {place})"));
                    }
                }
                Some(None) => {}
                None => self.report.add(
                    self.limit,
                    format!("{place}, page {}", fault.page),
                    fault.detail,
                ),
            }
        }
        sound
    }

    /// Pass 3 for one table whose structures are sound (the `n`th of `tables`): records
    /// against index entries, both ways.
    fn verify_agreement(&mut self, table: &Table, (n, tables): (usize, usize)) {
        let Records::Heap(heap) = &table.records else {
            return;
        };
        let name = &table.schema.name;
        let mut indexes = vec![(
            format!("table {name}, primary index"),
            &table.key,
            &table.primary,
            true,
        )];
        let secondaries: Vec<u32> = table.secondaries.read().clone();
        for id in secondaries {
            if let Ok(index) = self.db.index_by_id(id) {
                indexes.push((
                    format!("index {}", index.schema.name),
                    &index.key,
                    &index.store,
                    index.schema.unique,
                ));
            }
        }
        indexes.retain(|(_, _, store, _)| {
            matches!(store, IndexStore::Generic(_) | IndexStore::Int(_))
        });

        // Every live record has its entry in every index.
        let limit = self.limit;
        let report = &mut self.report;
        let mut compared = 0u64;
        let tell = |compared: u64| {
            (self.progress)(IntegrityStep::Agreement {
                table: name,
                n,
                tables,
                done: compared,
            })
        };
        tell(0);

        // The sums first: where every index holds exactly the (key, record) pairs the records
        // imply, that is all pass 3 must know, in two sequential scans. Only where they differ
        // (or a key cannot be encoded, or a scan fails) the comparison below, a lookup per
        // record and per entry, finds and names each fault.
        if let Some(entries) = fingerprints_agree(table, heap, &indexes, &mut compared, &tell) {
            self.report.entries += entries;
            tell(compared);
            return;
        }
        let mut live = 0usize;
        let mut key = Vec::new();
        let mut probe = Vec::new();
        let scanned = heap.scan(|rid, rec| {
            live += 1;
            compared += 1;
            if compared.is_multiple_of(PROGRESS_EVERY) {
                tell(compared);
            }
            let loc = rid.to_u64();
            for (place, spec, store, unique) in &indexes {
                let problem = match spec.encode_record(&table.layout, rec, &mut key) {
                    Err(e) => Some(format!("its key cannot be encoded: {e}")),
                    Ok(()) => match entry_of(store, &key, loc, *unique, &mut probe) {
                        Ok(true) => None,
                        Ok(false) => Some(format!("no entry for it in {place}")),
                        Err(e) => Some(format!("looking it up in {place}: {e}")),
                    },
                };
                if let Some(problem) = problem {
                    report.add(limit, format!("table {name}, record {rid}"), problem);
                }
            }
            true
        });
        if let Err(e) = scanned {
            report.add(
                limit,
                format!("table {name}, heap"),
                format!("scan failed: {e}"),
            );
        }

        // Every entry names a live record whose key it is.
        for (place, spec, store, _) in &indexes {
            let mut entries = 0usize;
            let scanned = store.scan(
                Bound::Unbounded,
                Bound::Unbounded,
                false,
                usize::MAX,
                |stored, loc| {
                    entries += 1;
                    compared += 1;
                    if compared.is_multiple_of(PROGRESS_EVERY) {
                        tell(compared);
                    }
                    let expected = record_key(table, spec, loc, &mut key);
                    let problem = match expected {
                        Err(e) => Some(format!("reading record {}: {e}", RecordId::from_u64(loc))),
                        Ok(None) => Some(format!(
                            "entry names record {}, which is not a live record",
                            RecordId::from_u64(loc)
                        )),
                        Ok(Some(())) => {
                            // A scan hands out the user key (a non-unique tree's entry
                            // without the value it appends).
                            (stored != &key[..]).then(|| {
                                format!(
                                    "entry for record {} does not hold that record's key",
                                    RecordId::from_u64(loc)
                                )
                            })
                        }
                    };
                    if let Some(problem) = problem {
                        report.add(limit, place.clone(), problem);
                    }
                    true
                },
            );
            if let Err(e) = scanned {
                report.add(limit, place.clone(), format!("scan failed: {e}"));
            }
            report.entries += entries;
            if entries != live {
                report.add(
                    limit,
                    place.clone(),
                    format!("{entries} index entries but {live} records in table {name}"),
                );
            }
        }
        tell(compared);
    }
}

/// The (key, record) pairs of one index, or those the records imply for it: how many, and the
/// wrapping sum of a 64-bit hash of each (SipHash-1-3 of the key and the record's location).
/// Two equal multisets of pairs have equal fingerprints; two unequal ones, whatever their
/// difference, have equal fingerprints only if the hashes of the pairs in which they differ
/// cancel in the sum, with odds of about one in 2^64.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Fingerprint {
    pairs: u64,
    sum: u64,
}

impl Fingerprint {
    fn add(&mut self, key: &[u8], loc: u64) {
        use std::hash::Hasher;
        // The standard library's hasher made with `new` has fixed keys: the same in every run.
        let mut h = std::hash::DefaultHasher::new();
        h.write(key);
        h.write_u64(loc);
        self.pairs += 1;
        self.sum = self.sum.wrapping_add(h.finish());
    }
}

/// Pass 3's comparison by sums, for one table: fingerprints of the pairs its records imply for
/// each index (one scan of the heap) against those of the pairs each index holds (one scan of
/// it). The entries counted if every index's agree; `None` if one differs, a key cannot be
/// encoded or a scan fails, for the comparison by lookups to find out why. `compared` counts
/// records and entries for the progress `tell`.
fn fingerprints_agree(
    table: &Table,
    heap: &storage::heap::HeapFile,
    indexes: &[(String, &crate::keys::KeySpec, &IndexStore, bool)],
    compared: &mut u64,
    tell: &dyn Fn(u64),
) -> Option<usize> {
    let mut implied = vec![Fingerprint::default(); indexes.len()];
    let mut key = Vec::new();
    let mut encoded = true;
    let count = |compared: &mut u64| {
        *compared += 1;
        if compared.is_multiple_of(PROGRESS_EVERY) {
            tell(*compared);
        }
    };
    heap.scan(|rid, rec| {
        count(compared);
        for ((_, spec, _, _), print) in indexes.iter().zip(&mut implied) {
            if spec.encode_record(&table.layout, rec, &mut key).is_err() {
                encoded = false;
                return false;
            }
            print.add(&key, rid.to_u64());
        }
        true
    })
    .ok()?;
    if !encoded {
        return None;
    }
    let mut entries = 0;
    for ((_, _, store, _), implied) in indexes.iter().zip(&implied) {
        let mut held = Fingerprint::default();
        // A scan hands out the user key (a non-unique tree's entry without the location it
        // appends), as the records imply it.
        store
            .scan(
                Bound::Unbounded,
                Bound::Unbounded,
                false,
                usize::MAX,
                |stored, loc| {
                    count(compared);
                    held.add(stored, loc);
                    true
                },
            )
            .ok()?;
        if held != *implied {
            return None;
        }
        entries += held.pairs as usize;
    }
    Some(entries)
}

/// Pass 1 over `pool`: reads every page, reports each that fails its checksum or header check,
/// and notes it in `bad_pages` with the index of its fault if that was kept.
fn verify_pages(
    pool: &BufferPool,
    limit: usize,
    report: &mut IntegrityReport,
    bad_pages: &mut HashMap<PageId, Option<usize>>,
    progress: &dyn Fn(IntegrityStep<'_>),
) {
    report.pages = pool.page_count();
    let total = report.pages;
    for p in 0..total {
        if p.is_multiple_of(PROGRESS_EVERY) {
            progress(IntegrityStep::Pages { done: p, total });
        }
        let page = PageId(p);
        if let Err(e) = pool.fix_shared(page) {
            let fault = Fault::from_error(page, &e);
            let kept = report.faults.len() < limit;
            report.add(limit, format!("page file, page {page}"), fault.detail);
            bad_pages.insert(page, kept.then(|| report.faults.len() - 1));
        }
    }
    progress(IntegrityStep::Pages { done: total, total });
}

/// Pass 1 alone, over the page file of the database in `dir`, for a database that cannot be
/// opened (a damaged page on the path every open reads, such as a heap chain): every page's
/// checksum and header, so that each damaged page is reported, not only the first the open
/// met. The page size comes from `catalog.json`. Reads only; tells `progress` every few
/// thousand pages how far it has got.
pub fn verify_page_file(
    dir: &Path,
    fault_limit: usize,
    progress: &dyn Fn(IntegrityStep<'_>),
) -> TxResult<IntegrityReport> {
    let catalog = dir.join(CATALOG_FILE);
    let bytes = std::fs::read(&catalog)
        .map_err(|e| TxError::Storage(storage::StorageError::io("read catalog", e)))?;
    let page_size = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| v.get("page_size")?.as_u64())
        .and_then(|bytes| PageSize::from_bytes(bytes as usize))
        .ok_or_else(|| {
            TxError::Invalid(format!("{} names no valid page size", catalog.display()))
        })?;
    let store = FilePageStore::open(&dir.join(PAGE_FILE), page_size)?;
    let pool = BufferPool::new(
        Box::new(store),
        PoolConfig {
            page_size,
            frames: 64,
            latching: true,
        },
        None,
    )?;
    let mut report = IntegrityReport {
        pages_only: true,
        ..IntegrityReport::default()
    };
    verify_pages(
        &pool,
        fault_limit,
        &mut report,
        &mut HashMap::new(),
        progress,
    );
    Ok(report)
}

/// Whether `store` holds the entry of a record at `loc` whose key is `key` (a non-unique
/// index stores `key ++ loc`, big-endian, and its scans hand out `key`).
fn entry_of(
    store: &IndexStore,
    key: &[u8],
    loc: u64,
    unique: bool,
    probe: &mut Vec<u8>,
) -> storage::StorageResult<bool> {
    if unique {
        return Ok(store.get(key)? == Some(loc));
    }
    probe.clear();
    probe.extend_from_slice(key);
    probe.extend_from_slice(&loc.to_be_bytes());
    let mut present = false;
    store.scan(
        Bound::Included(&probe[..]),
        Bound::Included(&probe[..]),
        false,
        usize::MAX,
        |stored, value| {
            present |= stored == key && value == loc;
            !present
        },
    )?;
    Ok(present)
}

/// Encodes into `key` the key `spec` takes from the record at `loc`: `Ok(None)` if there is
/// no live record there.
fn record_key(
    table: &Table,
    spec: &crate::keys::KeySpec,
    loc: u64,
    key: &mut Vec<u8>,
) -> TxResult<Option<()>> {
    let encoded = table
        .records
        .with(loc, |rec| spec.encode_record(&table.layout, rec, key))?;
    encoded.transpose()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use storage::page::PAGE_HEADER_SIZE;

    use super::*;
    use crate::schema::{IndexKind, IndexSchema, TableSchema};
    use crate::{DbConfig, Tx, Value};

    const ROWS: i64 = 2000;

    /// `accounts(id, owner, balance)` with `ROWS` rows and a non-unique index on `owner`, in
    /// memory on pages (the default switches keep `page-access` on).
    fn loaded() -> Arc<Database> {
        let db = Database::open(DbConfig {
            pool_mib: 16,
            ..DbConfig::default()
        })
        .unwrap();
        let t = db
            .create_table(
                TableSchema::new("accounts")
                    .int("id")
                    .string("owner", 16)
                    .int("balance")
                    .key(&["id"]),
            )
            .unwrap();
        db.create_index(IndexSchema {
            name: "accounts_by_owner".into(),
            table: "accounts".into(),
            columns: vec![1],
            unique: false,
            kind: IndexKind::BTree,
            int_key_bits: None,
        })
        .unwrap();
        for chunk in (0..ROWS).collect::<Vec<_>>().chunks(500) {
            db.run(|tx| {
                for id in chunk {
                    let owner = Value::Str(format!("owner{}", id % 300));
                    tx.insert(&t, &[Value::Int(*id), owner, Value::Int(100)])?;
                }
                Ok(())
            })
            .unwrap();
        }
        db
    }

    fn table(db: &Database) -> &Table {
        db.tables.iter().find_map(|t| t.get()).unwrap()
    }

    /// The first `N` entries of `t`'s primary index: (key, record location).
    fn first_entries<const N: usize>(t: &Table) -> [(Vec<u8>, u64); N] {
        let mut first = Vec::new();
        t.primary
            .scan(
                Bound::Unbounded,
                Bound::Unbounded,
                false,
                usize::MAX,
                |k, v| {
                    first.push((k.to_vec(), v));
                    first.len() < N
                },
            )
            .unwrap();
        first.try_into().expect("enough entries")
    }

    /// The place and detail of every fault, one line each, for messages.
    fn listing(report: &IntegrityReport) -> String {
        let lines: Vec<String> = report.faults.iter().map(|f| f.to_string()).collect();
        lines.join("\n")
    }

    #[test]
    fn a_healthy_database_checks_clean_and_counts_what_it_verified() {
        let db = loaded();
        let report = db.verify_integrity(100);
        assert!(report.is_clean(), "{}", listing(&report));
        assert_eq!(report.records, ROWS as usize);
        assert_eq!(report.entries, 2 * ROWS as usize, "primary and secondary");
        assert_eq!(report.heaps, 1);
        assert_eq!(report.trees, 2);
        assert_eq!(report.unreached_pages, 0);
        assert_eq!(
            report.heap_pages + report.tree_pages + 1,
            report.pages as usize,
            "every page but the meta page belongs to one structure"
        );
    }

    #[test]
    fn a_damaged_heap_slot_is_reported_at_its_page() {
        let db = loaded();
        let Records::Heap(heap) = &table(&db).records else {
            panic!("a heap table");
        };
        let first = heap.first_page();
        {
            // Slot 0's length grown by 100 bytes: the record now overlaps its neighbour.
            let pool = db.pool().unwrap();
            let mut page = pool.fix_exclusive(first).unwrap();
            let len_at = PAGE_HEADER_SIZE + 16 + 2;
            let len = u16::from_le_bytes([page[len_at], page[len_at + 1]]) + 100;
            page.range_mut(len_at, 2)
                .copy_from_slice(&len.to_le_bytes());
        }
        let report = db.verify_integrity(100);
        assert_eq!(report.faults_total, 1, "{}", listing(&report));
        assert_eq!(
            report.faults[0].place,
            format!("table accounts, heap, page {first}")
        );
    }

    #[test]
    fn index_entries_missing_or_naming_no_record_are_reported_by_index_and_record() {
        let db = loaded();
        let t = table(&db);
        // The primary entry of the first record gone; a secondary entry naming a record that does not
        // exist added.
        let [(key, loc)] = first_entries(t);
        assert!(t.primary.delete(&key, loc).unwrap());
        let index = db.indexes.iter().find_map(|i| i.get()).unwrap();
        let ghost = RecordId {
            page: PageId(1),
            slot: 4000,
        };
        let mut entry = Vec::new();
        let rec = t.records.with(loc, |rec| rec.to_vec()).unwrap().unwrap();
        index
            .key
            .encode_record(&t.layout, &rec, &mut entry)
            .unwrap();
        index.store.insert(&entry, ghost.to_u64()).unwrap();

        let report = db.verify_integrity(100);
        let listing = listing(&report);
        let rid = RecordId::from_u64(loc);
        assert!(
            listing.contains(&format!(
                "table accounts, record {rid}: no entry for it in table accounts, primary index"
            )),
            "{listing}"
        );
        assert!(
            listing.contains(&format!(
                "index accounts_by_owner: entry names record {ghost}, which is not a live record"
            )),
            "{listing}"
        );
        assert!(
            listing.contains("table accounts, primary index: 1999 index entries but 2000 records"),
            "{listing}"
        );
    }

    /// Two primary entries that name each other's record: every count still agrees, and only
    /// the pairs of key and record differ (the sums of pass 3 must see it, and the lookups then
    /// name both records and both entries).
    #[test]
    fn entries_that_swapped_their_records_are_reported() {
        let db = loaded();
        let t = table(&db);
        let [(k1, l1), (k2, l2)] = first_entries(t);
        for (k, l) in [(&k1, l1), (&k2, l2)] {
            assert!(t.primary.delete(k, l).unwrap());
        }
        t.primary.insert(&k1, l2).unwrap();
        t.primary.insert(&k2, l1).unwrap();

        let report = db.verify_integrity(100);
        let listing = listing(&report);
        assert_eq!(report.faults_total, 4, "{listing}");
        for l in [l1, l2] {
            let rid = RecordId::from_u64(l);
            assert!(
                listing.contains(&format!(
                    "table accounts, record {rid}: no entry for it in table accounts, \
                     primary index"
                )),
                "{listing}"
            );
            assert!(
                listing.contains(&format!(
                    "table accounts, primary index: entry for record {rid} does not hold that \
                     record's key"
                )),
                "{listing}"
            );
        }
    }

    #[test]
    fn a_zeroed_btree_page_is_reported_and_every_fault_counted_past_the_limit() {
        let db = loaded();
        let index = db.indexes.iter().find_map(|i| i.get()).unwrap();
        let root = index.store.root().unwrap();
        let primary_root = table(&db).primary.root().unwrap();
        let pool = db.pool().unwrap();
        for page in [root, primary_root] {
            let mut g = pool.fix_exclusive(page).unwrap();
            let size = pool.page_size();
            g.range_mut(PAGE_HEADER_SIZE, size - PAGE_HEADER_SIZE)
                .fill(0);
            g.range_mut(storage::page::OFFSET_KIND, 1)[0] = 0;
        }
        let report = db.verify_integrity(1);
        assert_eq!(report.faults_total, 2);
        assert_eq!(report.faults.len(), 1, "kept up to the limit");
        assert_eq!(
            report.faults[0].place,
            format!("table accounts, primary index, page {primary_root}")
        );
        assert!(
            report.faults[0].detail.contains("not a b+-tree node"),
            "{}",
            report.faults[0]
        );
        // The trees' other pages are now reached by nothing.
        assert!(report.unreached_pages > 0);
    }
}
