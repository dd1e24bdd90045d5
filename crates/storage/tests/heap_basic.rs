//! Heap file: growth with forwarding, scans, reopening, logging of small diffs, concurrency.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use storage::buffer::{BufferPool, PoolConfig};
use storage::file::MemPageStore;
use storage::heap::{HeapFile, RecordId};
use storage::page::PageRedo;
use storage::{Lsn, PageId, PageLog, PageSize, StorageError, StorageResult};

fn pool_with(frames: usize, log: Option<Arc<dyn PageLog>>) -> Arc<BufferPool> {
    Arc::new(
        BufferPool::new(
            Box::new(MemPageStore::new(PageSize::Kib8)),
            PoolConfig {
                page_size: PageSize::Kib8,
                frames,
                latching: true,
            },
            log,
        )
        .unwrap(),
    )
}

#[test]
fn growing_record_moves_but_keeps_its_id() {
    let heap = HeapFile::create(pool_with(32, None)).unwrap();
    let small: Vec<RecordId> = (0..20u8).map(|i| heap.insert(&[i; 300]).unwrap()).collect();
    let rid = small[3];
    // 20 × 300 bytes fill most of the first page: 4000 bytes no longer fit there.
    heap.update(rid, &[0xEE; 4000]).unwrap();
    let mut out = Vec::new();
    assert!(heap.read(rid, &mut out).unwrap());
    assert_eq!(out, vec![0xEE; 4000]);
    // Grow again (the body moves again, one hop only), then shrink, then delete.
    heap.update(rid, &[0xDD; 8000]).unwrap();
    assert!(heap.read(rid, &mut out).unwrap());
    assert_eq!(out.len(), 8000);
    heap.update_in_place(rid, 7999, &[1]).unwrap();
    assert_eq!(heap.with_record(rid, |b| b[7999]).unwrap(), Some(1));
    // A read-modify-write of the moved body under one latch: it reads what is there and
    // writes where it read.
    {
        let mut record = heap.fix_record(rid).unwrap().expect("the moved record");
        assert_eq!(record.bytes().len(), 8000);
        let last = record.bytes()[7999];
        record.write_pieces(&[(7998, &[last + 1])]).unwrap();
        assert_eq!(record.bytes()[7998], 2);
    }
    assert_eq!(heap.with_record(rid, |b| b[7998]).unwrap(), Some(2));
    heap.check_invariants().unwrap();
    heap.update(rid, b"tiny").unwrap();
    assert!(heap.read(rid, &mut out).unwrap());
    assert_eq!(out, b"tiny");
    let mut seen = 0;
    heap.scan(|r, b| {
        if r == rid {
            assert_eq!(b, b"tiny");
        }
        seen += 1;
        true
    })
    .unwrap();
    assert_eq!(seen, 20, "moved bodies are not scanned twice");
    assert!(heap.delete(rid).unwrap());
    assert!(!heap.read(rid, &mut out).unwrap());
    heap.check_invariants().unwrap();
}

#[test]
fn oversized_records_and_bad_ids_are_errors() {
    let pool = pool_with(8, None);
    let heap = HeapFile::create(pool.clone()).unwrap();
    let max = heap.max_record_len();
    assert!(matches!(
        heap.insert(&vec![0; max + 1]),
        Err(StorageError::RecordTooLarge { .. })
    ));
    let rid = heap.insert(&vec![5; max]).unwrap();
    assert!(matches!(
        heap.update(rid, &vec![0; max + 1]),
        Err(StorageError::RecordTooLarge { .. })
    ));
    let ghost = RecordId {
        page: rid.page,
        slot: 40,
    };
    let mut out = Vec::new();
    assert!(!heap.read(ghost, &mut out).unwrap());
    assert!(matches!(
        heap.update(ghost, b"x"),
        Err(StorageError::NoSuchRecord(_))
    ));
    assert!(!heap.delete(ghost).unwrap());
    // The meta page is not a heap page.
    let meta = RecordId {
        page: PageId::META,
        slot: 0,
    };
    assert!(matches!(
        heap.read(meta, &mut out),
        Err(StorageError::Invalid(_))
    ));
}

#[test]
fn scan_stops_early_and_reopen_sees_everything() {
    let pool = pool_with(16, None);
    let heap = HeapFile::create(pool.clone()).unwrap();
    let rids: Vec<RecordId> = (0..2000u32)
        .map(|i| heap.insert(&i.to_le_bytes().repeat(20)).unwrap())
        .collect();
    assert!(
        rids.iter()
            .map(|r| r.page)
            .collect::<std::collections::HashSet<_>>()
            .len()
            > 5
    );
    let mut n = 0;
    heap.scan(|_, _| {
        n += 1;
        n < 10
    })
    .unwrap();
    assert_eq!(n, 10);
    let reopened = HeapFile::open(pool.clone(), heap.first_page()).unwrap();
    reopened.check_invariants().unwrap();
    let mut count = 0;
    reopened
        .scan(|rid, b| {
            let i = u32::from_le_bytes(b[..4].try_into().unwrap());
            assert_eq!(rids[i as usize], rid);
            count += 1;
            true
        })
        .unwrap();
    assert_eq!(count, 2000);
    // Inserting into the reopened file fills holes first.
    assert!(reopened.delete(rids[5]).unwrap());
    let again = reopened.insert(&[1; 80]).unwrap();
    assert_eq!(again.page, rids[5].page);
}

#[derive(Default)]
struct ByteCountingLog {
    next: AtomicU64,
    bytes: Mutex<Vec<usize>>,
}

impl PageLog for ByteCountingLog {
    fn log_redo(&self, pages: &[PageRedo<'_>]) -> Lsn {
        let total = pages
            .iter()
            .flat_map(|p| p.ranges.iter())
            .map(|r| r.bytes.len())
            .sum();
        self.bytes.lock().unwrap().push(total);
        Lsn(self.next.fetch_add(1, Ordering::SeqCst) + 1)
    }
    fn flush_to(&self, _: Lsn) -> StorageResult<()> {
        Ok(())
    }
}

#[test]
fn heap_changes_are_logged_as_small_diffs() {
    let log = Arc::new(ByteCountingLog::default());
    let heap = HeapFile::create(pool_with(8, Some(log.clone() as Arc<dyn PageLog>))).unwrap();
    let logged = |log: &ByteCountingLog| log.bytes.lock().unwrap().last().copied().unwrap();
    let rid = heap.insert(&[7; 100]).unwrap();
    // Record bytes + slot entry + free_end + slot_count.
    assert!(
        logged(&log) <= 100 + 6 + 2 + 2,
        "insert logged {}",
        logged(&log)
    );
    heap.update(rid, &[8; 100]).unwrap();
    assert_eq!(logged(&log), 100, "same-size update logs the record only");
    heap.update_in_place(rid, 10, &[1, 2, 3, 4]).unwrap();
    assert_eq!(
        logged(&log),
        4,
        "in-place update logs the changed bytes only"
    );
    // Two columns far apart: one redo record with just their bytes, not the gap between.
    heap.update_pieces(rid, &[(2, &[5, 5]), (90, &[6, 6, 6])])
        .unwrap();
    assert_eq!(logged(&log), 5, "a two-piece update logs both pieces only");
    let bytes = heap.with_record(rid, |r| r.to_vec()).unwrap().unwrap();
    assert_eq!(
        (&bytes[2..4], &bytes[90..93]),
        (&[5u8, 5][..], &[6u8, 6, 6][..])
    );
    assert_eq!(&bytes[10..14], &[1, 2, 3, 4]);
    // A piece outside the record is refused before anything is written.
    let err = heap
        .update_pieces(rid, &[(0, &[9]), (99, &[9, 9])])
        .unwrap_err();
    assert!(matches!(err, StorageError::Invalid(_)), "{err}");
    assert_eq!(heap.with_record(rid, |r| r[0]).unwrap(), Some(8));
    // A read-modify-write under one latch logs what it wrote, as the guard goes; one that
    // wrote nothing logs nothing.
    let before = log.bytes.lock().unwrap().len();
    drop(heap.fix_record(rid).unwrap().expect("the record"));
    assert_eq!(
        log.bytes.lock().unwrap().len(),
        before,
        "a read alone was logged"
    );
    {
        let mut record = heap.fix_record(rid).unwrap().expect("the record");
        let b = record.bytes()[50];
        record.write_pieces(&[(50, &[b + 1, b + 1])]).unwrap();
    }
    assert_eq!(
        logged(&log),
        2,
        "a read-modify-write logs the bytes it wrote"
    );
    heap.delete(rid).unwrap();
    // Slot entry + free_end (or fragmented) + free_slots.
    assert!(logged(&log) <= 6 + 2 + 2, "delete logged {}", logged(&log));
    assert!(
        heap.fix_record(rid).unwrap().is_none(),
        "a deleted record fixed"
    );
}

/// The records a thread wrote, with their ids.
type Written = Vec<(RecordId, Vec<u8>)>;

/// Joins the threads, each returning the records it wrote, then checks the file and reads
/// every record back; returns them all.
fn joined_and_readable(heap: &HeapFile, threads: Vec<std::thread::JoinHandle<Written>>) -> Written {
    let all: Written = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    heap.check_invariants().unwrap();
    let mut out = Vec::new();
    for (rid, r) in &all {
        assert!(heap.read(*rid, &mut out).unwrap());
        assert_eq!(&out, r);
    }
    all
}

#[test]
fn concurrent_inserts_and_reads_keep_the_file_consistent() {
    let pool = pool_with(16, None);
    let heap = Arc::new(HeapFile::create(pool.clone()).unwrap());
    let threads: Vec<_> = (0..4u8)
        .map(|t| {
            let heap = heap.clone();
            std::thread::spawn(move || {
                let mut mine = Vec::new();
                let mut out = Vec::new();
                for i in 0..400usize {
                    let r = vec![t; 50 + (i * 37) % 700];
                    let rid = heap.insert(&r).unwrap();
                    mine.push((rid, r));
                    if i % 3 == 0 {
                        let (rid, r) = &mut mine[i / 2];
                        r.resize(r.len() + 900, t);
                        heap.update(*rid, r).unwrap();
                    }
                    let (rid, r) = &mine[i / 2];
                    assert!(heap.read(*rid, &mut out).unwrap());
                    assert_eq!(&out, r);
                }
                mine
            })
        })
        .collect();
    let all = joined_and_readable(&heap, threads);
    let mut n = 0;
    heap.scan(|_, _| {
        n += 1;
        true
    })
    .unwrap();
    assert_eq!(n, all.len());
    pool.check_invariants();
}

/// With one insertion page for all threads, a record inserted by one thread goes to the page
/// another thread inserted into last (with pages of their own, never), and threads inserting
/// at once keep the file consistent.
#[test]
fn threads_sharing_insertion_pages_insert_into_one_page() {
    let pool = pool_with(32, None);
    let shared = HeapFile::create(pool.clone())
        .unwrap()
        .sharing_insertion_pages(true);
    let own = HeapFile::create(pool.clone()).unwrap();
    for (heap, sharing) in [(&shared, true), (&own, false)] {
        // Two live threads (a thread that ends gives its number, and so its insertion page,
        // to the next one), the second inserting after the first.
        let both = std::sync::Barrier::new(2);
        let (first_done, wait_first) = std::sync::mpsc::channel();
        let (a, b) = std::thread::scope(|s| {
            let first = s.spawn(|| {
                let a = heap.insert(&[1; 100]).unwrap();
                first_done.send(()).unwrap();
                both.wait();
                a
            });
            wait_first.recv().unwrap();
            let second = s.spawn(|| {
                let b = heap.insert(&[2; 100]).unwrap();
                both.wait();
                b
            });
            (first.join().unwrap(), second.join().unwrap())
        });
        assert_eq!(
            a.page == b.page,
            sharing,
            "sharing insertion pages: {sharing}"
        );
    }
    let heap = Arc::new(shared);
    let threads: Vec<_> = (0..4u8)
        .map(|t| {
            let heap = heap.clone();
            std::thread::spawn(move || {
                (0..300)
                    .map(|i| {
                        let r = vec![t; 40 + i % 60];
                        (heap.insert(&r).unwrap(), r)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    joined_and_readable(&heap, threads);
    pool.check_invariants();
}

#[test]
fn small_records_fill_nearly_full_pages() {
    let heap = HeapFile::create(pool_with(8, None)).unwrap();
    let big: Vec<RecordId> = (0..8).map(|_| heap.insert(&[1; 1000]).unwrap()).collect();
    assert!(
        big.iter().all(|r| r.page == heap.first_page()),
        "8 × 1000 bytes fit one page"
    );
    // About 100 bytes are left on the first page: a small record still goes there.
    let small = heap.insert(&[2; 50]).unwrap();
    assert_eq!(small.page, heap.first_page());
    let next = heap.insert(&[3; 1000]).unwrap();
    assert_ne!(next.page, heap.first_page());
    heap.check_invariants().unwrap();
}

#[test]
fn freed_slots_are_reused_and_counted() {
    let heap = HeapFile::create(pool_with(8, None)).unwrap();
    let rids: Vec<RecordId> = (0..5u8).map(|i| heap.insert(&[i; 40]).unwrap()).collect();
    assert!(rids.iter().all(|r| r.page == rids[0].page));
    heap.delete(rids[1]).unwrap();
    heap.delete(rids[3]).unwrap();
    heap.check_invariants().unwrap();
    // The two freed directory entries are found (lowest first), then the directory grows.
    let again: Vec<u16> = (0..3u8)
        .map(|i| heap.insert(&[i; 40]).unwrap().slot)
        .collect();
    assert_eq!(again, vec![1, 3, 5]);
    heap.check_invariants().unwrap();
    // Restoring a record at a slot beyond the directory leaves the entries between free,
    // and the next inserts take them.
    let far = RecordId {
        page: rids[0].page,
        slot: 9,
    };
    heap.restore(far, &[9; 40]).unwrap();
    heap.check_invariants().unwrap();
    let next: Vec<u16> = (0..4u8)
        .map(|i| heap.insert(&[i; 40]).unwrap().slot)
        .collect();
    assert_eq!(next, vec![6, 7, 8, 10]);
    heap.check_invariants().unwrap();
}

/// `verify` reports every fault and goes on: a forwarding stub redirected to a slot that holds
/// no moved body is reported at the stub's page and slot, the body it left behind as claimed
/// by no stub, and a damaged slot on a later page of the chain as well.
#[test]
fn verify_reports_each_fault_by_page_and_slot() {
    const SLOTS_START: usize = 40;
    const SLOT_SIZE: usize = 6;
    let pool = pool_with(32, None);
    let heap = HeapFile::create(pool.clone()).unwrap();
    let rids: Vec<RecordId> = (0..60u8).map(|i| heap.insert(&[i; 300]).unwrap()).collect();
    let moved = rids[3];
    heap.update(moved, &[0xEE; 4000]).unwrap();
    // A record on a page between the first and the last (where the moved body went).
    let tail = rids.last().unwrap().page;
    let middle = *rids
        .iter()
        .find(|r| r.page != moved.page && r.page != tail)
        .expect("the records span three pages");
    let clean = heap.verify();
    assert!(clean.faults.is_empty(), "{:?}", clean.faults);
    assert_eq!(clean.records, 60);
    assert!(clean.pages.len() >= 3, "{:?}", clean.pages);

    let slot_entry = |slot: u16| SLOTS_START + SLOT_SIZE * slot as usize;
    {
        // The stub's target: a slot of its own page that holds no moved body.
        let mut page = pool.fix_exclusive(moved.page).unwrap();
        let at = slot_entry(moved.slot);
        let stub_at = u16::from_le_bytes([page[at], page[at + 1]]) as usize;
        let nowhere = RecordId {
            page: moved.page,
            slot: 9,
        };
        page.range_mut(stub_at, 8)
            .copy_from_slice(&nowhere.to_u64().to_le_bytes());
    }
    {
        // A live record's offset pushed past the end of the page.
        let mut page = pool.fix_exclusive(middle.page).unwrap();
        let at = slot_entry(middle.slot);
        page.range_mut(at, 2)
            .copy_from_slice(&8190u16.to_le_bytes());
    }
    let check = heap.verify();
    let faults: Vec<String> = check.faults.iter().map(|f| f.to_string()).collect();
    assert_eq!(faults.len(), 3, "{faults:#?}");
    assert!(
        faults
            .iter()
            .any(|f| f.starts_with(&format!("page {}", middle.page))
                && f.contains(&format!("slot {}", middle.slot))),
        "{faults:#?}"
    );
    assert!(
        faults.iter().any(|f| f.starts_with(&format!(
            "page {}: slot {}: forwarding stub points at",
            moved.page, moved.slot
        )) && f.contains("holds no moved body")),
        "{faults:#?}"
    );
    assert!(
        faults
            .iter()
            .any(|f| f.contains("moved body no forwarding stub points at")),
        "{faults:#?}"
    );
    assert!(heap.check_invariants().is_err());
}

/// A page in a redo record: its id, whether the record creates it (zeroed), and the next page
/// it links to, if the record sets that.
type LoggedPage = (PageId, bool, Option<u64>);

/// Records the pages each redo record holds.
#[derive(Default)]
struct PageRecordingLog {
    next: AtomicU64,
    records: Mutex<Vec<Vec<LoggedPage>>>,
}

impl PageLog for PageRecordingLog {
    fn log_redo(&self, pages: &[PageRedo<'_>]) -> Lsn {
        // A heap page's next-page link lies at the page header's end (byte 24, 8 bytes).
        let link = |p: &PageRedo<'_>| {
            p.ranges
                .iter()
                .find(|r| r.offset == 24 && r.bytes.len() >= 8)
                .map(|r| u64::from_le_bytes(r.bytes[..8].try_into().unwrap()))
        };
        let pages = pages.iter().map(|p| (p.page, p.zeroed, link(p))).collect();
        self.records.lock().unwrap().push(pages);
        Lsn(self.next.fetch_add(1, Ordering::SeqCst) + 1)
    }
    fn flush_to(&self, _: Lsn) -> StorageResult<()> {
        Ok(())
    }
}

/// Recovery may replay any prefix of the log: a record that links a page into the chain must
/// itself create that page, or a log cut just after it leaves a link to a page that never was.
#[test]
fn a_page_linked_into_the_chain_is_created_by_the_same_redo_record() {
    let log = Arc::new(PageRecordingLog::default());
    let heap = HeapFile::create(pool_with(64, Some(log.clone() as Arc<dyn PageLog>))).unwrap();
    for _ in 0..400 {
        heap.insert(&[3; 200]).unwrap();
    }
    let records = log.records.lock().unwrap();
    let mut links = 0;
    for record in records.iter() {
        for &(_, _, next) in record {
            let Some(next) = next.filter(|&n| n != 0) else {
                continue;
            };
            links += 1;
            assert!(
                record
                    .iter()
                    .any(|&(page, zeroed, _)| page.0 == next && zeroed),
                "a record links page {next} without creating it: {record:?}"
            );
        }
    }
    assert!(
        links >= 5,
        "400 records of 200 bytes fill several pages: {links} links"
    );
}

/// A read of a record nothing writes (a read-only table's) copies it out without latching its
/// page and answers as a latched read does: live records, free and deleted slots, a record
/// that moved (followed under latches, the one read counted where every thread meets).
#[test]
fn unchanging_reads_answer_as_latched_ones_and_latch_only_to_follow_a_move() {
    use storage::shared::{self, Place};
    let heap = HeapFile::create(pool_with(32, None)).unwrap();
    let rids: Vec<RecordId> = (0..20u8).map(|i| heap.insert(&[i; 300]).unwrap()).collect();
    let moved = rids[3];
    heap.update(moved, &[0xEE; 4000]).unwrap();
    let deleted = rids[5];
    assert!(heap.delete(deleted).unwrap());
    let free = RecordId {
        page: rids[0].page,
        slot: 200,
    };
    let before = shared::snapshot();
    for (i, rid) in rids.iter().enumerate() {
        if *rid != moved && *rid != deleted {
            let got = heap.with_unchanging_record(*rid, |b| b.to_vec()).unwrap();
            assert_eq!(got, Some(vec![i as u8; 300]));
        }
    }
    assert_eq!(heap.with_unchanging_record(deleted, |_| ()).unwrap(), None);
    assert_eq!(heap.with_unchanging_record(free, |_| ()).unwrap(), None);
    let latched = shared::snapshot().since(&before).at(Place::ReadOnlyPage);
    assert_eq!(latched, 0, "records in place are read without latching");
    let got = heap.with_unchanging_record(moved, |b| b.to_vec()).unwrap();
    assert_eq!(got, Some(vec![0xEE; 4000]));
    let latched = shared::snapshot().since(&before).at(Place::ReadOnlyPage);
    assert_eq!(latched, 1, "the moved record is followed under latches");
}

/// Unlatched reads keep answering right while another thread makes the pool evict and reuse
/// the frames they read from (the read must notice a frame that changed pages under it).
#[test]
fn unchanging_reads_survive_frames_evicted_under_them() {
    let pool = pool_with(8, None);
    let heap = Arc::new(HeapFile::create(pool.clone()).unwrap());
    // Some 40 pages of records, each filled with a byte naming it, in a pool of 8 frames.
    let records: Vec<(RecordId, Vec<u8>)> = (0..600usize)
        .map(|i| {
            let r = vec![(i % 251) as u8; 500 + i % 100];
            (heap.insert(&r).unwrap(), r)
        })
        .collect();
    let records = Arc::new(records);
    let threads: Vec<_> = (0..3usize)
        .map(|t| {
            let (heap, records) = (heap.clone(), records.clone());
            std::thread::spawn(move || {
                for n in 0..4000usize {
                    let (rid, r) = &records[(n * 7 + t * 131) % records.len()];
                    let got = heap.with_unchanging_record(*rid, |b| b == r.as_slice());
                    assert_eq!(got.unwrap(), Some(true), "record {rid} read back");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    pool.check_invariants();
}

/// Handoffs (`BufferPool::track_handoffs`): a latched fix of a page that another thread fixed
/// last counts one, by the page's kind; a thread fixing its own page again counts none, and an
/// unlatched read of an unchanging record counts none.
#[test]
fn page_latch_handoffs_count_fixes_after_another_threads() {
    let pool = pool_with(32, None);
    let heap = Arc::new(HeapFile::create(pool.clone()).unwrap());
    let rid = heap.insert(&[7; 100]).unwrap();
    assert_eq!(pool.handoffs(), None, "off until asked for");
    pool.track_handoffs();
    let read = move |heap: &HeapFile| heap.with_record(rid, |b| b[0]).unwrap();
    // Both threads stay alive throughout (thread numbers are given back when a thread ends).
    let (to_other, other_rx) = std::sync::mpsc::channel::<bool>();
    let (done_tx, done) = std::sync::mpsc::channel::<()>();
    let other = {
        let heap = heap.clone();
        std::thread::spawn(move || {
            while let Ok(unchanging) = other_rx.recv() {
                match unchanging {
                    true => {
                        assert_eq!(heap.with_unchanging_record(rid, |b| b[0]).unwrap(), Some(7))
                    }
                    false => assert_eq!(read(&heap), Some(7)),
                }
                done_tx.send(()).unwrap();
            }
        })
    };
    let other_reads = |unchanging: bool| {
        to_other.send(unchanging).unwrap();
        done.recv().unwrap();
    };
    assert_eq!(read(&heap), Some(7)); // the first fix since tracking began: no handoff
    assert_eq!(read(&heap), Some(7)); // this thread again: none
    assert_eq!(pool.handoffs().unwrap().total(), 0);
    other_reads(false); // the other thread's fix: one
    other_reads(true); // an unlatched read: none
    assert_eq!(read(&heap), Some(7)); // back to this thread: two
    let counted = pool.handoffs().unwrap();
    assert_eq!((counted.heap, counted.total()), (2, 2), "{counted:?}");
    drop(to_other);
    other.join().unwrap();
}
