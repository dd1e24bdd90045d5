//! The doublewrite file: pages read back through the batch, reach the page file only after
//! their copy is durable, and a page torn in the page file (or left behind by a crash before
//! its batch reached it) is put back at the next open, from whichever slot of the ring holds
//! its latest copy; the page file is synced once a round of the ring; a failed batch loses
//! nothing; a read of a page in no batch takes none of their locks, and never reads a page
//! older than the last one handed over.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use storage::doublewrite::{
    restore, DoublewriteStore, Layout, Restored, DEFAULT_SLOTS, DOUBLEWRITE_FILE,
};
use storage::file::{FilePageStore, PageStore};
use storage::page::{
    page_checksum, PageKind, OFFSET_CHECKSUM, OFFSET_KIND, OFFSET_LSN, OFFSET_MAGIC,
    OFFSET_PAGE_ID, PAGE_MAGIC,
};
use storage::shared::{self, Place};
use storage::{PageId, PageSize, StorageError, StorageResult};

const PS: usize = 8192;

/// A page image that passes the pool's check: page `id` at `lsn`, its body filled from `seed`.
fn page(id: u64, lsn: u64, seed: u8) -> Vec<u8> {
    let mut buf = vec![0u8; PS];
    for (i, b) in buf.iter_mut().enumerate().skip(64) {
        *b = seed.wrapping_add((i % 251) as u8);
    }
    buf[OFFSET_MAGIC..OFFSET_MAGIC + 2].copy_from_slice(&PAGE_MAGIC.to_le_bytes());
    buf[OFFSET_KIND] = PageKind::Heap as u8;
    buf[OFFSET_LSN..OFFSET_LSN + 8].copy_from_slice(&lsn.to_le_bytes());
    buf[OFFSET_PAGE_ID..OFFSET_PAGE_ID + 8].copy_from_slice(&id.to_le_bytes());
    let sum = page_checksum(&buf);
    buf[OFFSET_CHECKSUM..OFFSET_CHECKSUM + 4].copy_from_slice(&sum.to_le_bytes());
    buf
}

fn read(store: &dyn PageStore, id: u64) -> Vec<u8> {
    let mut buf = vec![0u8; PS];
    store.read_page(PageId(id), &mut buf).unwrap();
    buf
}

/// A page file whose writes can be made to fail (a disk that refuses them), and that counts
/// its syncs and keeps the pages it was told will be read ([`PageStore::will_need`]).
struct Failing {
    inner: FilePageStore,
    fail: AtomicBool,
    syncs: AtomicU64,
    advised: Mutex<Vec<PageId>>,
}

impl PageStore for Failing {
    fn read_page(&self, id: PageId, buf: &mut [u8]) -> StorageResult<()> {
        self.inner.read_page(id, buf)
    }
    fn write_page(&self, id: PageId, buf: &[u8]) -> StorageResult<()> {
        if self.fail.load(Ordering::Relaxed) {
            return Err(StorageError::io(
                "write page",
                std::io::Error::other("no space left (injected)"),
            ));
        }
        self.inner.write_page(id, buf)
    }
    fn sync(&self) -> StorageResult<()> {
        self.syncs.fetch_add(1, Ordering::Relaxed);
        self.inner.sync()
    }
    fn page_count(&self) -> u64 {
        self.inner.page_count()
    }
    fn will_need(&self, ids: &[PageId]) {
        self.advised.lock().unwrap().extend_from_slice(ids);
        self.inner.will_need(ids)
    }
}

fn failing(dir: &Path) -> Failing {
    wrapping(FilePageStore::create(&dir.join("pages.db"), PageSize::Kib8).unwrap())
}

fn wrapping(inner: FilePageStore) -> Failing {
    Failing {
        inner,
        fail: AtomicBool::new(false),
        syncs: AtomicU64::new(0),
        advised: Mutex::new(Vec::new()),
    }
}

#[test]
fn pages_read_back_from_the_batch_and_reach_the_page_file_in_whole_batches() {
    let dir = tempfile::tempdir().unwrap();
    let home = FilePageStore::create(&dir.path().join("pages.db"), PageSize::Kib8).unwrap();
    let store = DoublewriteStore::new(home, &dir.path().join(DOUBLEWRITE_FILE), PS, 4, 2).unwrap();
    for id in 1..=3 {
        store.write_page(PageId(id), &page(id, 10, 1)).unwrap();
    }
    // Three pages wait in the batch: read back from it, not yet in the page file.
    assert_eq!(read(&store, 2), page(2, 10, 1));
    assert_eq!(store.page_count(), 4);
    let plain = FilePageStore::open(&dir.path().join("pages.db"), PageSize::Kib8).unwrap();
    assert_eq!(
        plain.page_count(),
        0,
        "nothing reaches the page file before its batch"
    );
    // A page written twice into one batch takes one slot, with its last image.
    store.write_page(PageId(2), &page(2, 11, 2)).unwrap();
    store.write_page(PageId(4), &page(4, 10, 1)).unwrap();
    assert_eq!(store.stats().batches, 0);
    // The fifth page finds the batch full: the four go out first.
    store.write_page(PageId(5), &page(5, 10, 1)).unwrap();
    assert_eq!(store.stats().batches, 1);
    assert_eq!(store.stats().pages, 4);
    assert_eq!(store.stats().page_file_syncs, 0, "the ring has a free slot");
    assert_eq!(read(&plain, 2), page(2, 11, 2));
    assert_eq!(read(&plain, 5), vec![0u8; PS]);
    store.sync().unwrap();
    assert_eq!(read(&plain, 5), page(5, 10, 1));
    assert_eq!(store.stats().batches, 2);
    assert_eq!(store.stats().page_file_syncs, 1);
}

#[test]
fn a_page_torn_in_the_page_file_is_put_back_from_the_doublewrite_file() {
    let dir = tempfile::tempdir().unwrap();
    let pages = dir.path().join("pages.db");
    let dw = dir.path().join(DOUBLEWRITE_FILE);
    {
        let home = FilePageStore::create(&pages, PageSize::Kib8).unwrap();
        let store = DoublewriteStore::new(home, &dw, PS, 64, DEFAULT_SLOTS).unwrap();
        for id in 0..10 {
            store.write_page(PageId(id), &page(id, 5, 3)).unwrap();
        }
        store.sync().unwrap();
        for id in [3, 7] {
            store.write_page(PageId(id), &page(id, 9, 4)).unwrap();
        }
        store.sync().unwrap();
        std::mem::forget(store); // the process dies here: no close
    }
    // Tear page 7 (its first 4 KiB old, as a kill inside its write leaves it) and scramble
    // page 3's sectors, as a power loss may.
    let mut bytes = std::fs::read(&pages).unwrap();
    let old7 = page(7, 5, 3);
    bytes[7 * PS..7 * PS + 4096].copy_from_slice(&old7[..4096]);
    let old3 = page(3, 5, 3);
    for sector in (0..16).step_by(2) {
        let at = sector * 512;
        bytes[3 * PS + at..3 * PS + at + 512].copy_from_slice(&old3[at..at + 512]);
    }
    std::fs::write(&pages, &bytes).unwrap();

    let home = FilePageStore::open(&pages, PageSize::Kib8).unwrap();
    let done = restore(&dw, &home, PS).unwrap();
    // Pages 3 and 7 from the second batch, their latest copies; the first batch, which the
    // page file had synced before the second was written, is not compared.
    assert_eq!(
        done,
        Restored {
            torn: 2,
            older: 0,
            current: 0,
            synced: 10,
        }
    );
    assert_eq!(read(&home, 7), page(7, 9, 4));
    assert_eq!(read(&home, 3), page(3, 9, 4));
    assert_eq!(read(&home, 4), page(4, 5, 3));
    // Run again (a crash during the first restore): nothing left to do.
    let again = restore(&dw, &home, PS).unwrap();
    assert_eq!(again.torn + again.older, 0);
    assert_eq!(again.current, 2);
}

/// A batch the page file synced before a later batch was written cannot be torn there by
/// any crash after: the open compares only the batches since, so that a long ring costs an
/// open after a crash no more than the part of it the page file had not synced.
#[test]
fn a_restore_compares_only_the_batches_since_the_page_file_s_last_sync() {
    let dir = tempfile::tempdir().unwrap();
    let pages = dir.path().join("pages.db");
    let dw = dir.path().join(DOUBLEWRITE_FILE);
    {
        let home = FilePageStore::create(&pages, PageSize::Kib8).unwrap();
        let store = DoublewriteStore::new(home, &dw, PS, 2, 4).unwrap();
        // Six batches of two pages in a ring of four slots: the fifth finds its slot's batch
        // (the first) not synced in the page file and syncs it, which covers the first four.
        for id in 1..=13 {
            store.write_page(PageId(id), &page(id, 5, 1)).unwrap();
        }
        assert_eq!(store.stats().batches, 6);
        assert_eq!(store.stats().page_file_syncs, 1);
        std::mem::forget(store); // the process dies here: no close
    }
    // The ring holds batches 3 to 6: {5, 6}, {7, 8} synced, {9, 10}, {11, 12} not. Page 10
    // older in the page file (a write a power loss dropped); page 6 damaged, but not by the
    // crash: the page file had synced its whole copy.
    let home = wrapping(FilePageStore::open(&pages, PageSize::Kib8).unwrap());
    home.write_page(PageId(10), &page(10, 3, 9)).unwrap();
    home.write_page(PageId(6), &page(6, 2, 7)).unwrap();
    let done = restore(&dw, &home, PS).unwrap();
    // The pages it compares asked for at once, before the first is read; no other.
    let mut advised = home.advised.lock().unwrap().clone();
    advised.sort();
    assert_eq!(advised, [9, 10, 11, 12].map(PageId));
    assert_eq!(
        done,
        Restored {
            torn: 0,
            older: 1,
            current: 3,
            synced: 4,
        }
    );
    assert_eq!(read(&home, 10), page(10, 5, 1));
    assert_eq!(
        read(&home, 6),
        page(6, 2, 7),
        "left for the check to find, not put back"
    );
    // A store passes such advice on to its page file.
    let store = DoublewriteStore::new(home, &dw, PS, 2, 4).unwrap();
    store.will_need(&[PageId(3)]);
    assert!(store.home().advised.lock().unwrap().ends_with(&[PageId(3)]));
}

/// A store closed cleanly has every batch synced in the page file: it empties the ring, so
/// the next open compares nothing, and a page damaged after the close stays damaged (for the
/// check to find) instead of being put back from the ring without a word.
#[test]
fn a_clean_close_empties_the_ring() {
    let dir = tempfile::tempdir().unwrap();
    let pages = dir.path().join("pages.db");
    let dw = dir.path().join(DOUBLEWRITE_FILE);
    {
        let home = FilePageStore::create(&pages, PageSize::Kib8).unwrap();
        let store = DoublewriteStore::new(home, &dw, PS, 4, DEFAULT_SLOTS)
            .unwrap()
            .with_writer()
            .unwrap();
        for id in 0..10 {
            store.write_page(PageId(id), &page(id, 5, 3)).unwrap();
        }
        store.sync().unwrap();
        store.write_page(PageId(3), &page(3, 9, 4)).unwrap();
        // Dropped with page 3's new copy still in the batch: the close writes it out first.
    }
    let home = FilePageStore::open(&pages, PageSize::Kib8).unwrap();
    assert_eq!(read(&home, 3), page(3, 9, 4));
    let mut bytes = std::fs::read(&pages).unwrap();
    bytes[7 * PS..7 * PS + 4096].copy_from_slice(&page(7, 2, 1)[..4096]);
    std::fs::write(&pages, &bytes).unwrap();
    assert_eq!(restore(&dw, &home, PS).unwrap(), Restored::default());
    assert_ne!(read(&home, 7), page(7, 5, 3), "the damage stays");
    // The file keeps its length: the next store writes nothing out again.
    let layout = Layout {
        slots: DEFAULT_SLOTS,
        slot_pages: 4,
    };
    assert_eq!(std::fs::metadata(&dw).unwrap().len(), layout.file_len(PS));
}

#[test]
fn a_crash_before_the_batch_reached_the_page_file_is_finished_at_the_open() {
    let dir = tempfile::tempdir().unwrap();
    let dw = dir.path().join(DOUBLEWRITE_FILE);
    let home = failing(dir.path());
    let store = DoublewriteStore::new(home, &dw, PS, 64, DEFAULT_SLOTS).unwrap();
    for id in 1..=3 {
        store.write_page(PageId(id), &page(id, 5, 1)).unwrap();
    }
    store.sync().unwrap();
    for id in 1..=3 {
        store.write_page(PageId(id), &page(id, 8, 2)).unwrap();
    }
    // The doublewrite file takes the batch; the page file refuses it, as a crash between
    // the two would leave it.
    // (Reach the inner store through a second handle: the wrapper owns it.)
    set_failing(&store, true);
    let err = store.sync().unwrap_err();
    assert!(err.to_string().contains("no space left"), "{err}");
    // Nothing is lost while the process runs: the batch still reads back.
    assert_eq!(read(&store, 2), page(2, 8, 2));
    std::mem::forget(store); // the process dies here: no close

    let home = FilePageStore::open(&dir.path().join("pages.db"), PageSize::Kib8).unwrap();
    assert_eq!(
        read(&home, 2),
        page(2, 5, 1),
        "the page file holds the old pages"
    );
    let done = restore(&dw, &home, PS).unwrap();
    assert_eq!(
        done,
        Restored {
            torn: 0,
            older: 3,
            current: 0,
            synced: 3,
        }
    );
    for id in 1..=3 {
        assert_eq!(read(&home, id), page(id, 8, 2));
    }
}

fn set_failing(store: &DoublewriteStore<Failing>, on: bool) {
    store.home().fail.store(on, Ordering::Relaxed);
}

/// A store of batches of two pages over a page file whose writes can be made to fail.
fn failing_store(dir: &Path) -> DoublewriteStore<Failing> {
    DoublewriteStore::new(
        failing(dir),
        &dir.join(DOUBLEWRITE_FILE),
        PS,
        2,
        DEFAULT_SLOTS,
    )
    .unwrap()
}

#[test]
fn a_batch_that_fails_stays_readable_and_goes_out_with_the_next_sync() {
    let dir = tempfile::tempdir().unwrap();
    let store = failing_store(dir.path());
    store.write_page(PageId(1), &page(1, 5, 1)).unwrap();
    store.write_page(PageId(2), &page(2, 5, 1)).unwrap();
    set_failing(&store, true);
    // The third page finds the batch full, and its write fails: the page is not taken.
    assert!(store.write_page(PageId(3), &page(3, 5, 1)).is_err());
    assert_eq!(read(&store, 1), page(1, 5, 1));
    assert_eq!(read(&store, 3), vec![0u8; PS]);
    set_failing(&store, false);
    store.write_page(PageId(3), &page(3, 5, 1)).unwrap();
    store.sync().unwrap();
    let plain = FilePageStore::open(&dir.path().join("pages.db"), PageSize::Kib8).unwrap();
    for id in 1..=3 {
        assert_eq!(read(&plain, id), page(id, 5, 1));
    }
    assert_eq!(store.stats().pages, 3);
}

/// Waits, ten seconds at most, until `done` holds.
fn eventually(what: &str, done: impl Fn() -> bool) {
    let start = std::time::Instant::now();
    while !done() {
        assert!(
            start.elapsed().as_secs() < 10,
            "{what}: not within ten seconds"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

#[test]
fn the_writer_thread_writes_each_batch_as_it_fills_and_a_failed_one_is_reported_later() {
    let dir = tempfile::tempdir().unwrap();
    let store = failing_store(dir.path()).with_writer().unwrap();
    let plain = FilePageStore::open(&dir.path().join("pages.db"), PageSize::Kib8).unwrap();
    store.write_page(PageId(1), &page(1, 5, 1)).unwrap();
    store.write_page(PageId(2), &page(2, 5, 1)).unwrap();
    // No third page comes to find the batch full: the writer thread writes it.
    eventually("the full batch in the page file", || {
        read(&plain, 2) == page(2, 5, 1)
    });
    assert_eq!(store.stats().batches, 1);
    assert_eq!(store.stats().writer_batches, 1);
    // A disk that refuses the writes: the writer's attempts fail quietly, the batches stay
    // readable, and a thread whose page finds both batches taken gets the error.
    set_failing(&store, true);
    let refused = (3..=8)
        .find(|&id| store.write_page(PageId(id), &page(id, 5, 1)).is_err())
        .expect("a write refused once both batches are held");
    assert!(
        refused <= 7,
        "two batches of two pages hold pages 3 to 6 at most"
    );
    for id in 1..refused {
        assert_eq!(read(&store, id), page(id, 5, 1), "page {id}");
    }
    assert_eq!(
        read(&store, refused),
        vec![0u8; PS],
        "the refused page is not taken"
    );
    set_failing(&store, false);
    store
        .write_page(PageId(refused), &page(refused, 5, 1))
        .unwrap();
    store.sync().unwrap();
    for id in 1..=refused {
        assert_eq!(read(&plain, id), page(id, 5, 1), "page {id}");
    }
    assert_eq!(store.stats().pages, refused);
}

#[test]
fn the_writer_thread_syncs_the_page_file_once_half_the_ring_is_unsynced() {
    // A ring of four one-page slots: after two batches the writer syncs the page file by
    // itself, so that no batch coming round to a slot has to.
    let dir = tempfile::tempdir().unwrap();
    let store = DoublewriteStore::new(
        failing(dir.path()),
        &dir.path().join(DOUBLEWRITE_FILE),
        PS,
        1,
        4,
    )
    .unwrap()
    .with_writer()
    .unwrap();
    let syncs = || store.home().syncs.load(Ordering::Relaxed);
    for id in 1..=4u64 {
        store.write_page(PageId(id), &page(id, 5, 1)).unwrap();
        eventually("the batch written", || store.stats().batches == id);
        eventually("the page file synced at half a round", || {
            syncs() == id / 2 && store.stats().page_file_syncs == id / 2
        });
    }
    assert_eq!(store.stats().writer_batches, 4);
}

#[test]
fn a_missing_empty_or_torn_doublewrite_file_restores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let pages = dir.path().join("pages.db");
    let dw = dir.path().join(DOUBLEWRITE_FILE);
    let home = FilePageStore::create(&pages, PageSize::Kib8).unwrap();
    home.write_page(PageId(1), &page(1, 5, 1)).unwrap();
    assert_eq!(restore(&dw, &home, PS).unwrap(), Restored::default());
    std::fs::write(&dw, b"").unwrap();
    assert_eq!(restore(&dw, &home, PS).unwrap(), Restored::default());
    // A batch whose header a crash tore: its pages never reached the page file.
    let layout = {
        let store = DoublewriteStore::new(
            FilePageStore::open(&pages, PageSize::Kib8).unwrap(),
            &dw,
            PS,
            8,
            2,
        )
        .unwrap();
        store.write_page(PageId(1), &page(1, 9, 2)).unwrap();
        store.sync().unwrap();
        store.layout()
    };
    // The first batch, number 1, went to slot 1.
    let header = layout.header_offset(1, PS) as usize;
    let copy = layout.page_offset(1, 0, PS) as usize;
    let mut bytes = std::fs::read(&dw).unwrap();
    bytes[header + 12] ^= 0xff;
    std::fs::write(&dw, &bytes).unwrap();
    home.write_page(PageId(1), &page(1, 5, 1)).unwrap();
    assert_eq!(restore(&dw, &home, PS).unwrap(), Restored::default());
    assert_eq!(read(&home, 1), page(1, 5, 1));
    // A page of the batch torn in the doublewrite file is not used either.
    bytes[header + 12] ^= 0xff;
    bytes[copy + 5000] ^= 0xff;
    std::fs::write(&dw, &bytes).unwrap();
    assert_eq!(restore(&dw, &home, PS).unwrap(), Restored::default());
    assert_eq!(read(&home, 1), page(1, 5, 1));
}

#[test]
fn the_page_file_is_synced_once_a_round_of_the_ring_and_at_each_sync() {
    let dir = tempfile::tempdir().unwrap();
    let slots = 3;
    let store = DoublewriteStore::new(
        failing(dir.path()),
        &dir.path().join(DOUBLEWRITE_FILE),
        PS,
        2,
        slots,
    )
    .unwrap();
    // Two pages a batch: the (2n + 1)th page sends the nth batch out. Batch n goes to the
    // slot of batch n - slots, which the page file must have synced first: one sync before
    // batches slots + 1, 2 * slots + 1, ...
    for id in 1..=31 {
        store.write_page(PageId(id), &page(id, 5, 1)).unwrap();
        let stats = store.stats();
        assert_eq!(stats.batches, (id - 1) / 2);
        let expected = stats.batches.saturating_sub(1) / slots as u64;
        assert_eq!(stats.page_file_syncs, expected, "after page {id}");
        assert_eq!(store.home().syncs.load(Ordering::Relaxed), expected);
    }
    assert_eq!(store.stats().page_file_syncs, 4);
    // A sync sends the last page out as batch 16 (its slot synced first, as any) and syncs
    // the page file after it.
    store.sync().unwrap();
    assert_eq!(store.stats().batches, 16);
    assert_eq!(store.stats().page_file_syncs, 15 / 3 + 1);
    assert_eq!(store.home().syncs.load(Ordering::Relaxed), 6);
}

#[test]
fn a_page_is_put_back_from_whichever_slot_holds_its_latest_copy() {
    let dir = tempfile::tempdir().unwrap();
    let pages = dir.path().join("pages.db");
    let dw = dir.path().join(DOUBLEWRITE_FILE);
    {
        let home = FilePageStore::create(&pages, PageSize::Kib8).unwrap();
        let store = DoublewriteStore::new(home, &dw, PS, 2, 4).unwrap();
        // Batches {1, 2}, {3, 4}, {5, 6} at LSN 5, then {1 at LSN 7, 7}; page 8 stays in the
        // batch being filled, lost with the process.
        for id in 1..=6 {
            store.write_page(PageId(id), &page(id, 5, 1)).unwrap();
        }
        store.write_page(PageId(1), &page(1, 7, 2)).unwrap();
        store.write_page(PageId(7), &page(7, 5, 1)).unwrap();
        store.write_page(PageId(8), &page(8, 5, 1)).unwrap();
        assert_eq!(store.stats().batches, 4);
        assert_eq!(store.stats().page_file_syncs, 0, "four slots, four batches");
        std::mem::forget(store); // the process dies here: no close
    }
    // Page 1 torn in the page file between its two versions; page 4 older than its copy (a
    // write a power loss dropped).
    let mut bytes = std::fs::read(&pages).unwrap();
    let old1 = page(1, 5, 1);
    bytes[PS..PS + 4096].copy_from_slice(&old1[..4096]);
    std::fs::write(&pages, &bytes).unwrap();
    let home = FilePageStore::open(&pages, PageSize::Kib8).unwrap();
    home.write_page(PageId(4), &page(4, 3, 9)).unwrap();
    let done = restore(&dw, &home, PS).unwrap();
    assert_eq!(
        done,
        Restored {
            torn: 1,
            older: 1,
            current: 5,
            synced: 0,
        }
    );
    assert_eq!(
        read(&home, 1),
        page(1, 7, 2),
        "the latest copy, not slot 1's"
    );
    assert_eq!(read(&home, 4), page(4, 5, 1));
    assert_eq!(read(&home, 8), vec![0u8; PS]);
    // The next store starts an empty ring: nothing of these batches is put back again.
    drop(DoublewriteStore::new(home, &dw, PS, 2, 4).unwrap());
    let home = FilePageStore::open(&pages, PageSize::Kib8).unwrap();
    assert_eq!(restore(&dw, &home, PS).unwrap(), Restored::default());
}

/// A crash while a batch was being written to the doublewrite file tears its copies there; the
/// page file still holds what the batch before left, and a copy older than the torn one is
/// the latest whole one.
#[test]
fn a_copy_torn_in_the_doublewrite_file_gives_way_to_the_page_s_copy_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let pages = dir.path().join("pages.db");
    let dw = dir.path().join(DOUBLEWRITE_FILE);
    let layout = {
        let home = FilePageStore::create(&pages, PageSize::Kib8).unwrap();
        let store = DoublewriteStore::new(home, &dw, PS, 2, 4).unwrap();
        // Batches {1, 2} at LSN 5, then {3 at LSN 5, 1 at LSN 7}.
        for id in 1..=3 {
            store.write_page(PageId(id), &page(id, 5, 1)).unwrap();
        }
        store.write_page(PageId(1), &page(1, 7, 1)).unwrap();
        store.sync().unwrap();
        assert_eq!(store.stats().batches, 2);
        let layout = store.layout();
        std::mem::forget(store);
        layout
    };
    // Page 1's copy in the second batch torn, and the page file holding what it held before
    // the first; pages 2 and 3 as the batches left them.
    let mut file = std::fs::read(&dw).unwrap();
    let newer = page(1, 7, 1);
    let at = (0..layout.slots)
        .map(|slot| layout.page_offset(slot, 1, PS) as usize)
        .find(|&at| file[at..at + PS] == newer[..])
        .expect("page 1's copy at LSN 7 in the file");
    file[at + 4096..at + PS].fill(0xAB);
    std::fs::write(&dw, &file).unwrap();
    let home = FilePageStore::open(&pages, PageSize::Kib8).unwrap();
    home.write_page(PageId(1), &page(1, 3, 9)).unwrap();
    let done = restore(&dw, &home, PS).unwrap();
    assert_eq!(
        done,
        Restored {
            torn: 0,
            older: 1,
            current: 2,
            synced: 0,
        }
    );
    assert_eq!(read(&home, 1), page(1, 5, 1), "the first batch's copy");
    assert_eq!(read(&home, 2), page(2, 5, 1));
    assert_eq!(read(&home, 3), page(3, 5, 1));
}

#[test]
fn a_store_writes_the_file_out_once_and_clears_every_earlier_rings_headers() {
    let dir = tempfile::tempdir().unwrap();
    let pages = dir.path().join("pages.db");
    let dw = dir.path().join(DOUBLEWRITE_FILE);
    let len = || std::fs::metadata(&dw).unwrap().len();
    {
        // A ring of 64 one-page slots: six batches, their headers in blocks 1 to 6.
        let home = FilePageStore::create(&pages, PageSize::Kib8).unwrap();
        let store = DoublewriteStore::new(home, &dw, PS, 1, 64).unwrap();
        assert_eq!(
            len(),
            Layout {
                slots: 64,
                slot_pages: 1
            }
            .file_len(PS)
        );
        for id in 0..6 {
            store.write_page(PageId(id), &page(id, 5, 1)).unwrap();
        }
        store.sync().unwrap();
        assert_eq!(store.stats().batches, 6);
        std::mem::forget(store); // the process dies here: a close would empty the ring
    }
    let home = FilePageStore::open(&pages, PageSize::Kib8).unwrap();
    assert_eq!(restore(&dw, &home, PS).unwrap().current, 6);
    // A ring of two slots of 64 pages: its pages lie where the old ring's headers 2 to 63
    // were. Left there, they would be read as the ring's after a crash before its first batch.
    let layout = Layout {
        slots: 2,
        slot_pages: 64,
    };
    let store = DoublewriteStore::new(home, &dw, PS, 64, 2).unwrap();
    assert_eq!(
        len(),
        layout.file_len(PS),
        "the whole ring, written at the open"
    );
    drop(store);
    let home = FilePageStore::open(&pages, PageSize::Kib8).unwrap();
    assert_eq!(restore(&dw, &home, PS).unwrap(), Restored::default());
    // Batches write into the file and never lengthen it.
    let store = DoublewriteStore::new(home, &dw, PS, 64, 2).unwrap();
    for round in 0..3u8 {
        for id in 0..100 {
            store
                .write_page(PageId(id), &page(id, 10 + u64::from(round), round))
                .unwrap();
        }
        store.sync().unwrap();
        assert_eq!(len(), layout.file_len(PS));
    }
    assert_eq!(store.stats().batches, 6);
}

/// Page `id` read from `store`, and how many times this thread took a batch's lock for it.
fn read_counting(store: &dyn PageStore, id: u64) -> (Vec<u8>, u64) {
    let before = shared::snapshot();
    let buf = read(store, id);
    (
        buf,
        shared::snapshot().since(&before).at(Place::Doublewrite),
    )
}

#[test]
fn a_read_of_a_page_in_neither_batch_takes_no_lock_of_theirs() {
    let dir = tempfile::tempdir().unwrap();
    let home = FilePageStore::create(&dir.path().join("pages.db"), PageSize::Kib8).unwrap();
    let store = DoublewriteStore::new(home, &dir.path().join(DOUBLEWRITE_FILE), PS, 4, 2).unwrap();
    let before = shared::snapshot();
    store.write_page(PageId(1), &page(1, 10, 1)).unwrap();
    assert_eq!(shared::snapshot().since(&before).at(Place::Doublewrite), 1);
    let zeroes = vec![0u8; PS];
    assert_eq!(read_counting(&store, 1), (page(1, 10, 1), 1));
    // Page 4097 shares page 1's bucket of the count: its read looks in the batches.
    assert_eq!(read_counting(&store, 4097), (zeroes.clone(), 1));
    assert_eq!(read_counting(&store, 2), (zeroes.clone(), 0));
    store.sync().unwrap();
    // In the page file now, and no longer counted.
    assert_eq!(read_counting(&store, 1), (page(1, 10, 1), 0));
    assert_eq!(read_counting(&store, 4097), (zeroes, 0));
}

/// A full batch takes a lock every thread's full batches take: the writer thread's, to wake it,
/// or (a batch behind, or with no writer thread) the ring's, to write the batch itself. Each is
/// counted once beside the batch's own lock.
#[test]
fn a_full_batch_counts_its_wake_or_its_write_as_a_shared_place() {
    let dir = tempfile::tempdir().unwrap();
    let counted = |store: &dyn PageStore, id: u64| {
        let before = shared::snapshot();
        store.write_page(PageId(id), &page(id, 10, 0)).unwrap();
        shared::snapshot().since(&before).at(Place::Doublewrite)
    };
    let home = FilePageStore::create(&dir.path().join("a.db"), PageSize::Kib8).unwrap();
    let store = DoublewriteStore::new(home, &dir.path().join("a.dw"), PS, 2, 2)
        .unwrap()
        .with_writer()
        .unwrap();
    assert_eq!(counted(&store, 1), 1);
    assert_eq!(counted(&store, 2), 2, "the batch filled: the writer woken");
    drop(store);
    let home = FilePageStore::create(&dir.path().join("b.db"), PageSize::Kib8).unwrap();
    let store = DoublewriteStore::new(home, &dir.path().join("b.dw"), PS, 2, 2).unwrap();
    assert_eq!(counted(&store, 1), 1);
    assert_eq!(counted(&store, 2), 1, "filled, and no thread to wake");
    assert_eq!(
        counted(&store, 3),
        3,
        "found full: written by this thread, then taken"
    );
}

#[test]
fn a_page_reads_back_at_least_as_new_as_its_last_write_while_batches_go_out() {
    // Two threads write pages of two ids per bucket of the count (`j` and `4096 + j`) in
    // batches of two pages; two others read each page after its writer handed it over (as a
    // pool reads a page only after its write-back returned) and must find that version or a
    // later one, whether it is in a batch, on its way to the page file or there.
    let dir = tempfile::tempdir().unwrap();
    let home = FilePageStore::create(&dir.path().join("pages.db"), PageSize::Kib8).unwrap();
    let store = DoublewriteStore::new(home, &dir.path().join(DOUBLEWRITE_FILE), PS, 2, 2).unwrap();
    let ids: Vec<u64> = (0..4).flat_map(|j| [j, 4096 + j]).collect();
    let handed: Vec<AtomicU64> = ids.iter().map(|_| AtomicU64::new(0)).collect();
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let writers: Vec<_> = (0..2u64)
            .map(|w| {
                let (store, ids, handed) = (&store, &ids, &handed);
                s.spawn(move || {
                    // Each writer owns half of the ids: one writer per page, as in a pool.
                    for version in 1..=150u64 {
                        for (i, &id) in ids.iter().enumerate().filter(|(i, _)| *i as u64 % 2 == w) {
                            store.write_page(PageId(id), &page(id, version, 0)).unwrap();
                            handed[i].store(version, Ordering::Release);
                        }
                    }
                })
            })
            .collect();
        for r in 0..2usize {
            let (store, ids, handed, done) = (&store, &ids, &handed, &done);
            s.spawn(move || {
                let mut buf = vec![0u8; PS];
                let mut n = r;
                while !done.load(Ordering::Relaxed) {
                    let i = n % ids.len();
                    n += 3;
                    let at_least = handed[i].load(Ordering::Acquire);
                    store.read_page(PageId(ids[i]), &mut buf).unwrap();
                    let lsn = storage::page::page_lsn(&buf).0;
                    assert!(
                        lsn >= at_least,
                        "page {} read back at version {lsn} after version {at_least} was handed over",
                        ids[i]
                    );
                }
            });
        }
        // The writers end first (a failed one too); then the readers are told to stop.
        let written: Vec<_> = writers.into_iter().map(|w| w.join()).collect();
        done.store(true, Ordering::Relaxed);
        for w in written {
            w.unwrap();
        }
    });
    assert!(store.stats().batches >= 500, "{:?}", store.stats());
    store.sync().unwrap();
    for &id in &ids {
        assert_eq!(read(&store, id), page(id, 150, 0), "page {id}");
    }
}
