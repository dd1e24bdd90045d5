//! The doublewrite file: pages read back through the batch, reach the page file only after
//! their copy is durable, and a page torn in the page file (or left behind by a crash before
//! its batch reached it) is put back at the next open; a failed batch loses nothing.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use storage::doublewrite::{restore, DoublewriteStore, Restored, DOUBLEWRITE_FILE};
use storage::file::{FilePageStore, PageStore};
use storage::page::{
    page_checksum, PageKind, OFFSET_CHECKSUM, OFFSET_KIND, OFFSET_LSN, OFFSET_MAGIC,
    OFFSET_PAGE_ID, PAGE_MAGIC,
};
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

/// A page file whose writes can be made to fail (a disk that refuses them).
struct Failing {
    inner: FilePageStore,
    fail: AtomicBool,
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
        self.inner.sync()
    }
    fn page_count(&self) -> u64 {
        self.inner.page_count()
    }
}

fn failing(dir: &Path) -> Failing {
    Failing {
        inner: FilePageStore::create(&dir.join("pages.db"), PageSize::Kib8).unwrap(),
        fail: AtomicBool::new(false),
    }
}

#[test]
fn pages_read_back_from_the_batch_and_reach_the_page_file_in_whole_batches() {
    let dir = tempfile::tempdir().unwrap();
    let home = FilePageStore::create(&dir.path().join("pages.db"), PageSize::Kib8).unwrap();
    let store = DoublewriteStore::new(home, &dir.path().join(DOUBLEWRITE_FILE), PS, 4).unwrap();
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
    assert_eq!(read(&plain, 2), page(2, 11, 2));
    assert_eq!(read(&plain, 5), vec![0u8; PS]);
    store.sync().unwrap();
    assert_eq!(read(&plain, 5), page(5, 10, 1));
    assert_eq!(store.stats().batches, 2);
}

#[test]
fn a_page_torn_in_the_page_file_is_put_back_from_the_doublewrite_file() {
    let dir = tempfile::tempdir().unwrap();
    let pages = dir.path().join("pages.db");
    let dw = dir.path().join(DOUBLEWRITE_FILE);
    {
        let home = FilePageStore::create(&pages, PageSize::Kib8).unwrap();
        let store = DoublewriteStore::new(home, &dw, PS, 64).unwrap();
        for id in 0..10 {
            store.write_page(PageId(id), &page(id, 5, 3)).unwrap();
        }
        store.sync().unwrap();
        for id in [3, 7] {
            store.write_page(PageId(id), &page(id, 9, 4)).unwrap();
        }
        store.sync().unwrap();
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
    assert_eq!(
        done,
        Restored {
            torn: 2,
            older: 0,
            current: 0
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

#[test]
fn a_crash_before_the_batch_reached_the_page_file_is_finished_at_the_open() {
    let dir = tempfile::tempdir().unwrap();
    let dw = dir.path().join(DOUBLEWRITE_FILE);
    let home = failing(dir.path());
    let store = DoublewriteStore::new(home, &dw, PS, 64).unwrap();
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
            current: 0
        }
    );
    for id in 1..=3 {
        assert_eq!(read(&home, id), page(id, 8, 2));
    }
}

fn set_failing(store: &DoublewriteStore<Failing>, on: bool) {
    store.home().fail.store(on, Ordering::Relaxed);
}

#[test]
fn a_batch_that_fails_stays_readable_and_goes_out_with_the_next_sync() {
    let dir = tempfile::tempdir().unwrap();
    let store = DoublewriteStore::new(
        failing(dir.path()),
        &dir.path().join(DOUBLEWRITE_FILE),
        PS,
        2,
    )
    .unwrap();
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
    {
        let store = DoublewriteStore::new(
            FilePageStore::open(&pages, PageSize::Kib8).unwrap(),
            &dw,
            PS,
            8,
        )
        .unwrap();
        store.write_page(PageId(1), &page(1, 9, 2)).unwrap();
        store.sync().unwrap();
    }
    let mut bytes = std::fs::read(&dw).unwrap();
    bytes[12] ^= 0xff;
    std::fs::write(&dw, &bytes).unwrap();
    home.write_page(PageId(1), &page(1, 5, 1)).unwrap();
    assert_eq!(restore(&dw, &home, PS).unwrap(), Restored::default());
    assert_eq!(read(&home, 1), page(1, 5, 1));
    // A page of the batch torn in the doublewrite file is not used either.
    bytes[12] ^= 0xff;
    bytes[PS + 5000] ^= 0xff;
    std::fs::write(&dw, &bytes).unwrap();
    assert_eq!(restore(&dw, &home, PS).unwrap(), Restored::default());
    assert_eq!(read(&home, 1), page(1, 5, 1));
}
