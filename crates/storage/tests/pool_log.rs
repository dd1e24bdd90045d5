//! Buffer pool with a fake `PageLog`: redo ranges, LSN stamping, the WAL rule, rec_lsn.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::Duration;

use storage::buffer::{BufferPool, PoolConfig};
use storage::file::{MemPageStore, PageStore};
use storage::page::{page_lsn, PageKind, PageRedo, OFFSET_MAGIC};
use storage::{Lsn, PageId, PageLog, PageSize, StorageResult};

type Record = Vec<(PageId, Vec<(u16, Vec<u8>)>)>;

#[derive(Default)]
struct FakeLog {
    next: AtomicU64,
    flushed: AtomicU64,
    records: Mutex<Vec<(Lsn, Record)>>,
    /// Pages logged as zero-filled first (fresh allocations).
    zeroed: Mutex<Vec<PageId>>,
    /// While true, a force of anything not yet flushed waits (as a force waits for a sync).
    held: Mutex<bool>,
    release: Condvar,
    /// Forces that found the log held and waited.
    waited: AtomicU64,
}

impl PageLog for FakeLog {
    fn log_redo(&self, pages: &[PageRedo<'_>]) -> Lsn {
        let lsn = Lsn(self.next.fetch_add(100, Ordering::SeqCst) + 100);
        self.zeroed
            .lock()
            .unwrap()
            .extend(pages.iter().filter(|p| p.zeroed).map(|p| p.page));
        let rec = pages
            .iter()
            .map(|p| {
                (
                    p.page,
                    p.ranges
                        .iter()
                        .map(|r| (r.offset, r.bytes.to_vec()))
                        .collect(),
                )
            })
            .collect();
        self.records.lock().unwrap().push((lsn, rec));
        lsn
    }
    fn flush_to(&self, lsn: Lsn) -> StorageResult<()> {
        if lsn.0 > self.flushed.load(Ordering::SeqCst) {
            let mut held = self.held.lock().unwrap();
            if *held {
                self.waited.fetch_add(1, Ordering::SeqCst);
            }
            while *held {
                held = self.release.wait(held).unwrap();
            }
        }
        self.flushed.fetch_max(lsn.0, Ordering::SeqCst);
        Ok(())
    }
}

impl FakeLog {
    fn hold(&self, held: bool) {
        *self.held.lock().unwrap() = held;
        self.release.notify_all();
    }
}

/// A store that checks the WAL rule on every write: the log must be durable up to the LSN of
/// the page being written.
struct WalCheckingStore {
    inner: MemPageStore,
    log: Arc<FakeLog>,
    writes: AtomicU64,
    violations: Mutex<Vec<(PageId, u64, u64)>>,
}

struct SharedStore(Arc<WalCheckingStore>);

impl PageStore for SharedStore {
    fn read_page(&self, id: PageId, buf: &mut [u8]) -> StorageResult<()> {
        self.0.inner.read_page(id, buf)
    }
    fn write_page(&self, id: PageId, buf: &[u8]) -> StorageResult<()> {
        let s = &self.0;
        let lsn = page_lsn(buf).0;
        let flushed = s.log.flushed.load(Ordering::SeqCst);
        if lsn > flushed {
            s.violations.lock().unwrap().push((id, lsn, flushed));
        }
        s.writes.fetch_add(1, Ordering::SeqCst);
        s.inner.write_page(id, buf)
    }
    fn sync(&self) -> StorageResult<()> {
        Ok(())
    }
    fn page_count(&self) -> u64 {
        self.0.inner.page_count()
    }
}

fn logged_pool(frames: usize) -> (BufferPool, Arc<FakeLog>, Arc<WalCheckingStore>) {
    let log = Arc::new(FakeLog::default());
    let store = Arc::new(WalCheckingStore {
        inner: MemPageStore::new(PageSize::Kib8),
        log: log.clone(),
        writes: AtomicU64::new(0),
        violations: Mutex::new(Vec::new()),
    });
    let pool = BufferPool::new(
        Box::new(SharedStore(store.clone())),
        PoolConfig {
            page_size: PageSize::Kib8,
            frames,
            latching: true,
        },
        Some(log.clone() as Arc<dyn PageLog>),
    )
    .unwrap();
    (pool, log, store)
}

#[test]
fn log_redo_receives_exactly_the_changed_ranges_coalesced() {
    let (pool, log, _) = logged_pool(4);
    let id = pool.allocate_page(PageKind::Heap).unwrap().page_id();
    {
        let recs = log.records.lock().unwrap();
        assert_eq!(recs.len(), 1, "allocation logs the new page");
        let (lsn, rec) = &recs[0];
        assert_eq!(rec[0].0, id);
        // Zero-filled, then the header: magic and kind (adjacent, one range), and the page
        // id. Not a page image of zeroes.
        assert_eq!(*log.zeroed.lock().unwrap(), vec![id]);
        let g = pool.fix_shared(id).unwrap();
        assert_eq!(
            rec[0].1,
            vec![
                (
                    OFFSET_MAGIC as u16,
                    g[OFFSET_MAGIC..OFFSET_MAGIC + 3].to_vec()
                ),
                (16, id.0.to_le_bytes().to_vec()),
            ]
        );
        assert_eq!(g.lsn(), *lsn);
    }
    {
        let mut g = pool.fix_exclusive(id).unwrap();
        g.range_mut(100, 4).copy_from_slice(b"aaaa");
        g.range_mut(104, 2).copy_from_slice(b"bb"); // touches: merged
        g.range_mut(500, 3).copy_from_slice(b"ccc");
        g.range_mut(101, 2).copy_from_slice(b"AA"); // inside: merged, newest bytes logged
        g.range_mut(40, 1)[0] = b'z';
        assert!(g.has_pending_changes());
    }
    let recs = log.records.lock().unwrap();
    assert_eq!(recs.len(), 2);
    let (lsn, rec) = recs[1].clone();
    assert_eq!(rec.len(), 1);
    assert_eq!(
        rec[0].1,
        vec![
            (40, b"z".to_vec()),
            (100, b"aAAabb".to_vec()),
            (500, b"ccc".to_vec())
        ]
    );
    drop(recs);
    let g = pool.fix_shared(id).unwrap();
    assert_eq!(g.lsn(), lsn);
    drop(g);
    // A write guard that changes nothing logs nothing and leaves the page as it was.
    drop(pool.fix_exclusive(id).unwrap());
    assert_eq!(log.records.lock().unwrap().len(), 2);
}

#[test]
fn log_together_emits_one_record_for_several_pages() {
    let (pool, log, _) = logged_pool(8);
    let a = pool.allocate_page(PageKind::BTreeLeaf).unwrap().page_id();
    let b = pool.allocate_page(PageKind::BTreeLeaf).unwrap().page_id();
    let before = log.records.lock().unwrap().len();
    let mut ga = pool.fix_exclusive(a).unwrap();
    let mut gb = pool.fix_exclusive(b).unwrap();
    ga.range_mut(1000, 2).copy_from_slice(b"xy");
    gb.range_mut(2000, 1)[0] = 7;
    pool.log_together(&mut [&mut ga, &mut gb]);
    assert!(!ga.has_pending_changes() && !gb.has_pending_changes());
    assert_eq!(ga.lsn(), gb.lsn());
    let lsn = ga.lsn();
    drop(ga);
    drop(gb);
    let recs = log.records.lock().unwrap();
    assert_eq!(recs.len(), before + 1, "released guards add no record");
    let (rec_lsn, rec) = &recs[before];
    assert_eq!(*rec_lsn, lsn);
    assert_eq!(rec.len(), 2);
    assert_eq!(rec[0], (a, vec![(1000, b"xy".to_vec())]));
    assert_eq!(rec[1], (b, vec![(2000, vec![7])]));
}

#[test]
fn wal_rule_holds_on_eviction_and_flush_and_rec_lsn_is_the_first_change() {
    let (pool, log, store) = logged_pool(8);
    let ids: Vec<PageId> = (0..80)
        .map(|_| pool.allocate_page(PageKind::Heap).unwrap().page_id())
        .collect();
    for round in 0..3u8 {
        for &id in &ids {
            let mut g = pool.fix_exclusive(id).unwrap();
            g.range_mut(200 + round as usize, 1)[0] = round + 1;
        }
    }
    // The first change since the last write-back is the page's rec_lsn.
    let last = *ids.last().unwrap();
    let first_lsn = pool.fix_shared(last).unwrap().lsn();
    pool.fix_exclusive(last).unwrap().range_mut(300, 1)[0] = 9;
    let dirty = pool.dirty_pages();
    let (_, rec) = dirty.iter().find(|(p, _)| *p == last).copied().unwrap();
    let page_lsn_now = pool.fix_shared(last).unwrap().lsn();
    assert!(rec <= first_lsn && rec != Lsn::NONE && page_lsn_now > first_lsn);

    pool.flush_all().unwrap();
    assert!(pool.dirty_pages().is_empty());
    assert!(store.writes.load(Ordering::SeqCst) >= 80 * 3 - 8);
    assert!(
        store.violations.lock().unwrap().is_empty(),
        "pages written before their log: {:?}",
        store.violations.lock().unwrap()
    );
    assert!(log.flushed.load(Ordering::SeqCst) >= page_lsn_now.0);
    for &id in &ids {
        let g = pool.fix_shared(id).unwrap();
        assert_eq!(&g[200..203], &[1, 2, 3]);
    }
    pool.check_invariants();
}

#[test]
fn redo_guards_are_not_logged() {
    let (pool, log, _) = logged_pool(4);
    let mut g = pool.fix_for_redo(PageId(3)).unwrap();
    g.range_mut(64, 4).copy_from_slice(b"redo");
    g.set_lsn(Lsn(7));
    drop(g);
    assert!(log.records.lock().unwrap().is_empty());
    assert_eq!(pool.dirty_pages(), vec![(PageId(3), Lsn(7))]);
}

#[test]
fn flush_older_than_writes_exactly_the_pages_first_changed_below_the_lsn() {
    let (pool, log, store) = logged_pool(32);
    let ids: Vec<PageId> = (0..10)
        .map(|_| pool.allocate_page(PageKind::Heap).unwrap().page_id())
        .collect();
    pool.flush_all().unwrap();
    assert!(pool.dirty_pages().is_empty());
    // Pages 0..10 first changed in order; pages 0..3 changed again later (their recovery LSN
    // stays their first change).
    for (i, &id) in ids.iter().enumerate() {
        pool.fix_exclusive(id).unwrap().range_mut(500, 1)[0] = i as u8 + 1;
    }
    for &id in &ids[..3] {
        pool.fix_exclusive(id).unwrap().range_mut(600, 1)[0] = 0xAA;
    }
    let before: std::collections::HashMap<PageId, Lsn> = pool.dirty_pages().into_iter().collect();
    assert_eq!(before.len(), 10);
    let cut = before[&ids[6]];
    let writes = store.writes.load(Ordering::SeqCst);

    assert_eq!(pool.flush_older_than(cut).unwrap(), 6);
    assert_eq!(store.writes.load(Ordering::SeqCst), writes + 6);
    let mut after = pool.dirty_pages();
    after.sort();
    let expected: Vec<(PageId, Lsn)> = ids[6..].iter().map(|id| (*id, before[id])).collect();
    assert_eq!(
        after, expected,
        "only pages first changed at or past {cut} stay dirty"
    );
    assert!(store.violations.lock().unwrap().is_empty());
    // What was written is the latest image, second changes included.
    let mut buf = vec![0u8; 8192];
    for (i, &id) in ids[..6].iter().enumerate() {
        store.inner.read_page(id, &mut buf).unwrap();
        assert_eq!(buf[500], i as u8 + 1);
        assert_eq!(buf[600], if i < 3 { 0xAA } else { 0 });
    }
    assert!(log.flushed.load(Ordering::SeqCst) >= before[&ids[2]].0);
    // Nothing older is left: a second call writes nothing.
    assert_eq!(pool.flush_older_than(cut).unwrap(), 0);
    pool.check_invariants();
}

/// A fuzzy checkpoint's dirty page table must list every page with a change logged before the
/// checkpoint's begin, even a page whose write guard logged the change and has not yet marked
/// the frame dirty when the table is read. Writers keep changing fresh pages (each one's first
/// change) while a checkpointer takes "begin" LSNs from the log and reads the table.
#[test]
fn dirty_pages_lists_every_page_changed_before_a_begin_lsn() {
    let (pool, log, _) = logged_pool(4096);
    let pool = Arc::new(pool);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let changed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let writers: Vec<_> = (0..2)
        .map(|_| {
            let (pool, stop, changed) = (pool.clone(), stop.clone(), changed.clone());
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) && n < 1800 {
                    let id = pool.allocate_page(PageKind::Heap).unwrap().page_id();
                    pool.fix_exclusive(id).unwrap().range_mut(300, 4)[0] = 1;
                    changed.fetch_add(1, Ordering::Relaxed);
                    n += 1;
                }
            })
        })
        .collect();
    let mut snapshots = Vec::new();
    // At least 400 checkpoints, and on until the writers have changed a few hundred pages
    // (on a loaded machine they may not even have started when 400 are taken).
    let mut taken = 0;
    while taken < 400 || (changed.load(Ordering::Relaxed) < 400 && taken < 1_000_000) {
        taken += 1;
        // A begin record: an LSN from the same counter the pages' records take theirs from.
        let begin = Lsn(log.next.fetch_add(100, Ordering::SeqCst) + 100);
        let table: std::collections::HashMap<PageId, Lsn> =
            pool.dirty_pages().into_iter().collect();
        snapshots.push((begin, table));
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    // No page was ever written back (the pool holds them all): each page's first record is
    // its recovery LSN, and every checkpoint must list every page first changed before it.
    let mut first: std::collections::HashMap<PageId, Lsn> = std::collections::HashMap::new();
    for (lsn, rec) in log.records.lock().unwrap().iter() {
        for (page, _) in rec {
            let e = first.entry(*page).or_insert(*lsn);
            *e = (*e).min(*lsn);
        }
    }
    assert!(
        first.len() > 100,
        "the writers changed too little: {}",
        first.len()
    );
    for (begin, table) in &snapshots {
        for (page, lsn) in &first {
            if lsn < begin {
                assert_eq!(
                    table.get(page),
                    Some(lsn),
                    "page {page} first changed at {lsn} is missing from the table at {begin}"
                );
            }
        }
    }
}

/// A checkpoint's write-back forces the log before it latches the page: while the force waits
/// (a sync, here held open), the page's writers are not shut out. The write that follows keeps
/// the WAL rule for the change made meanwhile, and the page ends clean with it.
#[test]
fn a_write_back_waits_for_the_log_without_the_page_latch() {
    let (pool, log, store) = logged_pool(8);
    let pool = Arc::new(pool);
    let id = pool.allocate_page(PageKind::Heap).unwrap().page_id();
    pool.fix_exclusive(id).unwrap().range_mut(200, 1)[0] = 1;
    log.hold(true);
    let flusher = {
        let pool = Arc::clone(&pool);
        std::thread::spawn(move || pool.flush_all())
    };
    while log.waited.load(Ordering::SeqCst) == 0 {
        std::thread::yield_now();
    }
    // The flusher waits in the log's force; a writer of the page gets its latch meanwhile.
    let (sent, changed) = mpsc::channel();
    let writer = {
        let pool = Arc::clone(&pool);
        std::thread::spawn(move || {
            pool.fix_exclusive(id).unwrap().range_mut(201, 1)[0] = 2;
            sent.send(()).unwrap();
        })
    };
    let latched = changed.recv_timeout(Duration::from_secs(10));
    log.hold(false);
    writer.join().unwrap();
    flusher.join().unwrap().unwrap();
    assert!(
        latched.is_ok(),
        "a writer waited for the page latch across the log force"
    );
    assert!(
        store.violations.lock().unwrap().is_empty(),
        "pages written before their log: {:?}",
        store.violations.lock().unwrap()
    );
    // The write-back after the force wrote the page as the writer left it.
    let mut image = vec![0u8; PageSize::Kib8.bytes()];
    store.inner.read_page(id, &mut image).unwrap();
    assert_eq!(&image[200..202], &[1, 2]);
    assert!(pool.dirty_pages().is_empty());
    pool.check_invariants();
}
