//! A page write that a crash tore is rebuilt from the log by the next open's redo, and the
//! database opens with every committed change. With full-page images (the default on disk)
//! any tear is: each page's first change since it was clean is logged as its whole image.
//! Without them, a tear as a process killed inside `pwrite` leaves it (the first part of the
//! new image, the rest of the image before) is rebuilt and checked against the checksum in
//! its header, and a page torn the other way round (its header old, as a power loss may leave
//! it) or damaged beyond what the log rebuilds is refused with an error naming it.

mod common;

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use common::*;
use engine::{Database, DbConfig, Doublewrite, FullPageImages, TxResult};

const ACCOUNTS: i64 = 2_000;
const PAGE: usize = 8 * 1024;

fn open_db(dir: &Path, images: bool, doublewrite: bool) -> TxResult<Arc<Database>> {
    Database::open(DbConfig {
        doublewrite: if doublewrite {
            Doublewrite::On
        } else {
            Doublewrite::Off
        },
        path: Some(dir.to_path_buf()),
        durable: true,
        full_page_images: if images {
            FullPageImages::On
        } else {
            FullPageImages::Off
        },
        ..DbConfig::default()
    })
}

/// The page file before and after the crash: every page written whole after a checkpoint
/// (`old`), then every account changed and every page written whole again (`new`), then the
/// process gone without a checkpoint. The log holds every change from `old` to `new`.
struct Crashed {
    dir: tempfile::TempDir,
    images: bool,
    doublewrite: bool,
    old: Vec<u8>,
    new: Vec<u8>,
}

impl Crashed {
    fn new(images: bool) -> Crashed {
        Crashed::with(images, false)
    }

    /// As [`Crashed::new`], with pages written back through a doublewrite file or not.
    fn with(images: bool, doublewrite: bool) -> Crashed {
        let dir = tempfile::tempdir().unwrap();
        let db = open_db(dir.path(), images, doublewrite).unwrap();
        let t = load_accounts(&db, ACCOUNTS);
        db.checkpoint().unwrap();
        db.pool().unwrap().flush_all().unwrap();
        let old = std::fs::read(dir.path().join("pages.db")).unwrap();
        // Every account gives 1 to the one half the table away: every row changes, on every
        // heap page, in both halves of each.
        for chunk in (0..ACCOUNTS / 2).collect::<Vec<_>>().chunks(100) {
            db.run(|tx| {
                for &i in chunk {
                    transfer(tx, &t, i, i + ACCOUNTS / 2, 1)?;
                }
                Ok(())
            })
            .unwrap();
        }
        db.pool().unwrap().flush_all().unwrap();
        // The doublewrite file as a crash here would leave it: every batch written and
        // synced, the ring full. (Dropped, the store knows its batches synced in the page file
        // and empties the ring, as a close does.)
        let dw = dir.path().join(storage::doublewrite::DOUBLEWRITE_FILE);
        let ring = doublewrite.then(|| std::fs::read(&dw).unwrap());
        drop(db); // no close: no checkpoint, recovery runs on the next open
        if let Some(ring) = ring {
            std::fs::write(&dw, ring).unwrap();
        }
        let new = std::fs::read(dir.path().join("pages.db")).unwrap();
        Crashed {
            dir,
            images,
            doublewrite,
            old,
            new,
        }
    }

    fn open(&self) -> TxResult<Arc<Database>> {
        open_db(self.dir.path(), self.images, self.doublewrite)
    }

    /// Pages that changed after the first 4 KiB: the ones a tear there leaves mixed.
    fn changed_late(&self) -> Vec<usize> {
        let pages = self.old.len().min(self.new.len()) / PAGE;
        (1..pages)
            .filter(|&p| {
                self.old[p * PAGE + 4096..(p + 1) * PAGE]
                    != self.new[p * PAGE + 4096..(p + 1) * PAGE]
            })
            .collect()
    }

    /// Writes page `page` as a write torn `at` bytes in leaves it: the new image's first `at`
    /// bytes and the old image's rest (`header_new`), or the other way round.
    fn tear(&self, page: usize, at: usize, header_new: bool) {
        let (first, rest) = if header_new {
            (&self.new, &self.old)
        } else {
            (&self.old, &self.new)
        };
        let base = page * PAGE;
        let mut image = first[base..base + at].to_vec();
        image.extend_from_slice(&rest[base + at..base + PAGE]);
        self.write(page, &image);
    }

    /// Writes page `page` as a write torn into 512-byte sectors leaves it when every other
    /// sector reached the disk, the header's not among them.
    fn scramble(&self, page: usize) {
        let base = page * PAGE;
        let image: Vec<u8> = (0..PAGE)
            .map(|i| {
                let from = if (i / 512) % 2 == 0 {
                    &self.old
                } else {
                    &self.new
                };
                from[base + i]
            })
            .collect();
        self.write(page, &image);
    }

    fn write(&self, page: usize, image: &[u8]) {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(self.dir.path().join("pages.db"))
            .unwrap();
        file.write_all_at(image, (page * PAGE) as u64).unwrap();
    }
}

/// Every account as the transfers left it, and a clean integrity check.
fn assert_intact(db: &Database) {
    let t = db.table("accounts").unwrap();
    assert_eq!(total(db, &t), ACCOUNTS * 100);
    for id in [0, 1, ACCOUNTS / 2 - 1, ACCOUNTS / 2, ACCOUNTS - 1] {
        let expected = if id < ACCOUNTS / 2 { 99 } else { 101 };
        assert_eq!(balance(db, id), expected, "account {id}");
    }
    let integrity = db.verify_integrity(10);
    assert!(integrity.is_clean(), "{integrity:?}");
}

/// Opens the crashed database, expects `rebuilt` torn pages rebuilt and every account right,
/// then opens it again once closed: nothing left to rebuild.
fn assert_rebuilt(crashed: &Crashed, rebuilt: usize) {
    let db = crashed.open().unwrap();
    let report = db.recovery().expect("the open recovered");
    assert_eq!(report.torn_rebuilt, rebuilt as u64, "{report}");
    assert!(report
        .to_string()
        .contains(&format!("{rebuilt} torn pages rebuilt")));
    assert_intact(&db);
    db.close().unwrap();
    // Written whole again: the next open reads every page as it is.
    let db = crashed.open().unwrap();
    assert_eq!(db.recovery().map_or(0, |r| r.torn_rebuilt), 0);
    assert_intact(&db);
}

#[test]
fn pages_torn_after_their_first_part_are_rebuilt_from_the_log() {
    for images in [false, true] {
        let crashed = Crashed::new(images);
        let torn = crashed.changed_late();
        assert!(torn.len() >= 4, "too few pages changed late: {torn:?}");
        // Torn where the kernel's copy stopped: after one 4 KiB memory page, or (larger
        // pages, other systems) at another boundary.
        for (i, &page) in torn.iter().enumerate() {
            let at = [4096, 4096, 512, 7168][i % 4];
            crashed.tear(page, at, true);
        }
        assert_rebuilt(&crashed, torn.len());
    }
}

#[test]
fn with_full_page_images_a_page_torn_in_any_pieces_is_rebuilt() {
    let crashed = Crashed::new(true);
    let torn = crashed.changed_late();
    assert!(torn.len() >= 3, "too few pages changed late: {torn:?}");
    crashed.tear(torn[0], 4096, false);
    crashed.scramble(torn[1]);
    crashed.tear(torn[2], 512, false);
    assert_rebuilt(&crashed, 3);
}

#[test]
fn full_page_images_are_logged_at_a_pages_first_change_since_it_was_clean() {
    for images in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let db = open_db(dir.path(), images, false).unwrap();
        let t = load_accounts(&db, 100);
        db.pool().unwrap().flush_all().unwrap();
        let log = db.log().unwrap();
        let mut grew = Vec::new();
        for amount in [1, 2] {
            let before = log.end_lsn();
            db.run(|tx| transfer(tx, &t, 0, 1, amount)).unwrap();
            grew.push(log.end_lsn().0 - before.0);
        }
        if images {
            assert!(grew[0] > PAGE as u64, "no whole image: {grew:?}");
        } else {
            assert!(grew[0] < 1024, "{grew:?}");
        }
        assert!(grew[1] < 1024, "the page was dirty already: {grew:?}");
    }
}

#[test]
fn without_full_page_images_a_page_torn_with_its_header_old_is_refused_naming_it() {
    let crashed = Crashed::new(false);
    let page = crashed.changed_late()[0];
    crashed.tear(page, 4096, false);
    let err = crashed
        .open()
        .err()
        .expect("a page the log cannot prove right was opened");
    let message = err.to_string();
    assert!(message.contains(&format!("page #{page}")), "{message}");
    assert!(message.contains("checksum mismatch"), "{message}");
    assert!(message.contains("not a write torn by a crash"), "{message}");
    assert!(message.contains("no image of the whole page"), "{message}");
}

#[test]
fn without_full_page_images_damage_the_log_does_not_explain_is_refused() {
    let crashed = Crashed::new(false);
    let page = crashed.changed_late()[0];
    crashed.tear(page, 4096, true);
    // The device byte of the header: set when the page was made, before the checkpoint, and
    // in none of the changes replayed since.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(crashed.dir.path().join("pages.db"))
        .unwrap();
    let at = (page * PAGE + storage::page::OFFSET_DEVICE) as u64;
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, at).unwrap();
    file.write_all_at(&[byte[0] ^ 0x01], at).unwrap();
    drop(file);
    let err = crashed.open().err().expect("a damaged page was opened");
    let message = err.to_string();
    assert!(message.contains(&format!("page #{page}")), "{message}");
    assert!(message.contains("not a write torn by a crash"), "{message}");
    assert!(message.contains("gave checksum"), "{message}");
}

/// With a doublewrite file and no images, a page of a batch in its ring torn in any pieces (its
/// header old too, which the log alone cannot rebuild) is put back from the file before
/// recovery runs; the database opens with every change, and a database opened without the
/// file afterwards is not rolled back to it.
#[test]
fn with_a_doublewrite_file_a_page_torn_in_any_pieces_is_put_back() {
    let crashed = Crashed::with(false, true);
    let dw = crashed
        .dir
        .path()
        .join(storage::doublewrite::DOUBLEWRITE_FILE);
    let bytes = std::fs::read(&dw).unwrap();
    // The pages the ring's slots hold (its layout from any whole header).
    let header = |slot: usize| {
        bytes
            .get(slot * PAGE..(slot + 1) * PAGE)
            .and_then(|block| storage::doublewrite::decode_header(block, 1000))
    };
    let layout = (0..storage::doublewrite::MAX_SLOTS)
        .find_map(header)
        .expect("a batch's header is whole")
        .layout;
    let batches: Vec<_> = (0..layout.slots).filter_map(header).collect();
    let synced = batches.iter().map(|batch| batch.synced).max().unwrap_or(0);
    let in_ring: Vec<storage::PageId> = batches
        .into_iter()
        .filter(|batch| batch.sequence > synced)
        .flat_map(|batch| batch.pages)
        .collect();
    // Only pages of the batches still in the ring and not yet synced in the page file can be
    // torn by a crash: a slot is written again only after the page file has synced its
    // batch, and each header names the last batch synced when it was written.
    let torn: Vec<usize> = crashed
        .changed_late()
        .into_iter()
        .filter(|&p| in_ring.contains(&storage::PageId(p as u64)))
        .collect();
    assert!(
        torn.len() >= 3,
        "too few pages of the ring's batches changed late: {torn:?}"
    );
    crashed.tear(torn[0], 4096, false);
    crashed.scramble(torn[1]);
    crashed.tear(torn[2], 512, true);
    let db = crashed.open().unwrap();
    let report = db.recovery().expect("the open recovered");
    assert_eq!(report.doublewrite_torn, 3, "{report}");
    assert!(report.doublewrite_restored >= 3, "{report}");
    assert_eq!(report.torn_rebuilt, 0, "{report}");
    assert!(
        report
            .to_string()
            .contains("put back from the doublewrite file (3 of them torn)"),
        "{report}"
    );
    assert_intact(&db);
    assert!(db.doublewrite().is_some());
    db.close().unwrap();
    // Opened without the file: its batch is forgotten, so pages written from then on are
    // never put back from it.
    let plain = open_db(crashed.dir.path(), false, false).unwrap();
    assert_eq!(std::fs::metadata(&dw).unwrap().len(), 0);
    assert!(plain.doublewrite().is_none());
    assert_intact(&plain);
    plain.close().unwrap();
    // The same tears without the file are beyond the log: the open refuses the page.
    let without = Crashed::with(false, false);
    let page = without.changed_late()[0];
    without.tear(page, 4096, false);
    assert!(without.open().is_err());
}

#[test]
fn an_untorn_crash_rebuilds_nothing() {
    for images in [false, true] {
        let crashed = Crashed::new(images);
        let db = crashed.open().unwrap();
        let report = db.recovery().expect("the open recovered");
        assert_eq!(report.torn_rebuilt, 0, "{report}");
        assert!(report.on_disk > 0, "{report}");
        assert_intact(&db);
    }
}
