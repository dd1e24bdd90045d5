//! Runs: a thread reserves log-buffer bytes for its page-redo records a run at a time and
//! hands them out without a shared write (`buffer::Run`). What one tail kept for free must
//! still hold: a page's records lie in the log in the order their changes were made (their
//! LSNs rise), a thread's record after one it reserved from the tail lies above it, and
//! whatever takes or reads the buffer sees whole frames (the runs' unused bytes closed as
//! padding, which the log's iterators skip).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use storage::page::{page_lsn, PageLog, OFFSET_LSN};
use storage::{Lsn, PageId};
use wal::{LogConfig, LogManager, LogMode, LogRecord, MemLogStorage, TxnId};

const PAGES: u64 = 6;
const THREADS: u64 = 4;
const CHANGES: u64 = 3000;
const IMAGE: usize = 256;
/// Where a change writes its (thread, number) tag in a page image.
const TAG: (u32, u32) = (64, 80);

/// A page: its image, and the tags of its changes in the order they were made.
type Page = Mutex<(Vec<u8>, Vec<[u8; 16]>)>;

fn open_log(runs: bool) -> Arc<LogManager> {
    // Small: the buffer is taken (every run closed) every few changes.
    open_log_sized(runs, 4096, wal::RUN_BYTES)
}

fn open_log_sized(runs: bool, buffer_bytes: usize, run_bytes: usize) -> Arc<LogManager> {
    let config = LogConfig {
        mode: LogMode::NoForce,
        buffer_bytes,
        accept_loss: false,
        latching: true,
        gather_commits: false,
        runs,
        run_bytes,
        sync_write_back: true,
    };
    Arc::new(
        LogManager::open(Box::new(MemLogStorage::new()), config)
            .unwrap()
            .0,
    )
}

fn tag(t: u64, i: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&t.to_le_bytes());
    b[8..].copy_from_slice(&i.to_le_bytes());
    b
}

/// Several threads change a few shared pages, each change logged as the buffer pool logs it
/// (the page's redo record, under the page's latch, the record's LSN stamped into the page),
/// among commits, updates and reads of their own records: then every page's records, read back
/// in the log's order, are its changes in the order they were made.
fn pages_changed_by_many_threads_are_redone_in_the_order_they_were_changed(runs: bool) {
    let log = open_log(runs);
    let pages: Arc<Vec<Page>> = Arc::new(
        (0..PAGES)
            .map(|_| Mutex::new((vec![0u8; IMAGE], Vec::new())))
            .collect(),
    );
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (log, pages) = (log.clone(), pages.clone());
            std::thread::spawn(move || {
                let mut prev = Lsn::NONE;
                for i in 0..CHANGES {
                    let p = (t * 7 + i * 3 + i / 5) % PAGES;
                    let lsn = {
                        let mut page = pages[p as usize].lock().unwrap();
                        let (image, order) = &mut *page;
                        let before = page_lsn(image);
                        image[TAG.0 as usize..TAG.1 as usize].copy_from_slice(&tag(t, i));
                        let lsn = log.log_page_redo(PageId(p), false, image, &[TAG]);
                        assert!(lsn > before, "page {p}: LSN {lsn} not above {before}");
                        image[OFFSET_LSN..OFFSET_LSN + 8].copy_from_slice(&lsn.0.to_le_bytes());
                        order.push(tag(t, i));
                        lsn
                    };
                    match i % 11 {
                        // A record from the tail: the thread's next redo must lie above it.
                        3 => {
                            let u = log.append_update(TxnId(t + 1), prev, b"undo");
                            prev = u;
                            let mut page = pages[p as usize].lock().unwrap();
                            let (image, order) = &mut *page;
                            let before = page_lsn(image);
                            image[TAG.0 as usize..TAG.1 as usize]
                                .copy_from_slice(&tag(t, CHANGES + i));
                            let after = log.log_page_redo(PageId(p), false, image, &[TAG]);
                            assert!(after > u, "redo {after} below the update {u} before it");
                            assert!(after > before);
                            image[OFFSET_LSN..OFFSET_LSN + 8]
                                .copy_from_slice(&after.0.to_le_bytes());
                            order.push(tag(t, CHANGES + i));
                        }
                        // A commit keeps the run.
                        7 => prev = log.append_commit(TxnId(t + 1), prev),
                        // A read of a buffered record closes every run.
                        9 => assert!(matches!(log.read(lsn), Ok(LogRecord::PageRedo { .. }))),
                        _ => {}
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    log.flush_to(log.end_lsn()).unwrap();
    log.check_invariants();

    let mut seen: HashMap<u64, Vec<[u8; 16]>> = HashMap::new();
    let mut last: HashMap<u64, Lsn> = HashMap::new();
    for item in log.iter_from(log.first_lsn()) {
        let (lsn, record) = item.expect("every frame reads back whole");
        match record {
            LogRecord::PageRedo { pages } => {
                for page in pages {
                    let before = last.insert(page.page.0, lsn).unwrap_or(Lsn::NONE);
                    assert!(lsn > before);
                    let bytes = &page.ranges[0].1;
                    seen.entry(page.page.0)
                        .or_default()
                        .push(bytes[..16].try_into().unwrap());
                }
            }
            LogRecord::Padding { .. } => panic!("the iterator yielded padding at {lsn}"),
            _ => {}
        }
    }
    for (p, page) in pages.iter().enumerate() {
        let order = &page.lock().unwrap().1;
        assert_eq!(
            seen.get(&(p as u64)).map_or(0, Vec::len),
            order.len(),
            "page {p}: records read back"
        );
        assert!(
            seen[&(p as u64)] == *order,
            "page {p}: the log's order is not the order of its changes"
        );
    }
}

#[test]
fn with_runs_a_pages_records_keep_the_order_of_its_changes() {
    pages_changed_by_many_threads_are_redone_in_the_order_they_were_changed(true);
}

#[test]
fn without_runs_too() {
    pages_changed_by_many_threads_are_redone_in_the_order_they_were_changed(false);
}

/// One thread: page redos share a run (consecutive LSNs), a record from the tail closes it
/// (the next redo lies above that record), a commit does not.
#[test]
fn a_tail_record_closes_the_run_and_a_commit_keeps_it() {
    let log = open_log(true);
    let mut image = vec![0u8; IMAGE];
    let redo = |log: &LogManager, image: &mut Vec<u8>| {
        let lsn = log.log_page_redo(PageId(1), false, image, &[TAG]);
        image[OFFSET_LSN..OFFSET_LSN + 8].copy_from_slice(&lsn.0.to_le_bytes());
        lsn
    };
    let a = redo(&log, &mut image);
    let b = redo(&log, &mut image);
    assert!(b > a);
    let len = b.0 - a.0;
    let c = redo(&log, &mut image);
    assert_eq!(
        c.0 - b.0,
        len,
        "the second and third redo follow on in the run"
    );
    let commit = log.append_commit(TxnId(1), Lsn::NONE);
    let d = redo(&log, &mut image);
    assert_eq!(d.0 - c.0, len, "a commit keeps the run: {d} {c}");
    assert!(
        d < commit,
        "the run lies below the commit taken from the tail"
    );
    let update = log.append_update(TxnId(2), Lsn::NONE, b"undo");
    let e = redo(&log, &mut image);
    assert!(
        e > update,
        "after a tail record the run is new: {e} {update}"
    );
    // A fresh page's record comes from the tail, above everything handed out.
    let fresh = log.log_page_redo(PageId(2), true, &[0u8; IMAGE], &[TAG]);
    assert!(fresh > e && fresh > update);
    log.flush_to(log.end_lsn()).unwrap();
    let redos = log
        .iter_from(log.first_lsn())
        .map(|r| r.unwrap().1)
        .filter(|r| matches!(r, LogRecord::PageRedo { .. }))
        .count();
    assert_eq!(redos, 6);
}

/// A run holds as many of a thread's page redos as its size allows, one after the other;
/// the next run begins where it ends (its rest padded), whatever size the log was given.
#[test]
fn a_run_is_as_long_as_the_log_was_told() {
    for run_bytes in [512, 2048, 8192] {
        let log = open_log_sized(true, 1 << 16, run_bytes);
        let mut image = vec![0u8; IMAGE];
        let lsns: Vec<Lsn> = (0..200)
            .map(|_| {
                let lsn = log.log_page_redo(PageId(1), false, &image, &[TAG]);
                image[OFFSET_LSN..OFFSET_LSN + 8].copy_from_slice(&lsn.0.to_le_bytes());
                lsn
            })
            .collect();
        let len = lsns[1].0 - lsns[0].0;
        let run_end = lsns[0].0 + run_bytes as u64;
        let next = lsns.iter().position(|l| l.0 >= run_end).unwrap();
        assert!(
            (1..next).all(|i| lsns[i].0 == lsns[0].0 + i as u64 * len),
            "{run_bytes}-byte runs: the first run's records follow on: {lsns:?}"
        );
        assert_eq!(
            lsns[next].0, run_end,
            "{run_bytes}-byte runs: the second run begins where the first ends"
        );
        assert!(
            next >= run_bytes / len as usize - 1,
            "{run_bytes}: {next} records"
        );
    }
}

/// The log's statistics tell the records' bytes from the padding that closes runs: after page
/// redo records, updates and commits from one thread, with the buffer taken now and then (every
/// run closed), the records' bytes are those the log reads back, and every other byte appended
/// is padding; without runs there is none.
#[test]
fn stats_tell_the_records_bytes_from_the_padding_of_runs() {
    for runs in [true, false] {
        let log = open_log_sized(runs, 1 << 20, wal::RUN_BYTES);
        let start = log.end_lsn();
        let mut image = vec![0u8; IMAGE];
        let mut prev = Lsn::NONE;
        for i in 0..600u64 {
            image[TAG.0 as usize..TAG.1 as usize].copy_from_slice(&tag(0, i));
            let lsn = log.log_page_redo(PageId(i % PAGES), false, &image, &[TAG]);
            image[OFFSET_LSN..OFFSET_LSN + 8].copy_from_slice(&lsn.0.to_le_bytes());
            if i % 7 == 0 {
                prev = log.append_update(TxnId(1), prev, b"undo");
            }
            if i % 11 == 0 {
                prev = log.append_commit(TxnId(1), prev);
            }
            if i % 50 == 0 {
                // Mid-run: the stats count the run's unused bytes apart.
                let s = log.stats();
                assert_eq!(
                    s.bytes,
                    s.record_bytes() + s.padding_bytes + s.unused_run_bytes
                );
                log.flush_to(log.end_lsn()).unwrap();
            }
        }
        log.flush_to(log.end_lsn()).unwrap();
        let stats = log.stats();
        let read_back: u64 = log
            .iter_from(start)
            .map(|item| item.expect("reads back").1.encoded_len() as u64)
            .sum();
        assert_eq!(stats.record_bytes(), read_back, "runs: {runs}");
        assert_eq!(stats.unused_run_bytes, 0, "the last flush closed every run");
        assert_eq!(stats.bytes, read_back + stats.padding_bytes, "runs: {runs}");
        if runs {
            assert!(stats.padding_bytes > 0, "twelve flushes closed runs");
        } else {
            assert_eq!(stats.padding_bytes, 0);
        }
    }
}
