//! A held-back `Update` record (`LogManager::hold_update_publishing`): carried into the log by
//! the thread's next record to the same log, under one latch acquisition, in order; or
//! appended alone when settled or dropped; its LSN published into the transaction's cell.
//!
//! `hold_update_publishing` is `unsafe` only for its promise that the token is settled or
//! dropped, never leaked: each test here settles or drops every token it holds.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use storage::page::{PageRedo, RedoRange};
use storage::{Lsn, PageId, PageLog};
use wal::{LogConfig, LogManager, LogMode, LogRecord, MemLogStorage, TxnId};

fn open(mode: LogMode) -> LogManager {
    let config = LogConfig {
        mode,
        buffer_bytes: 1 << 20,
        accept_loss: false,
        latching: true,
        gather_commits: true,
        runs: true,
        run_bytes: wal::RUN_BYTES,
        sync_write_back: true,
    };
    LogManager::open(Box::new(MemLogStorage::new()), config)
        .unwrap()
        .0
}

fn redo(log: &LogManager, page: u64) -> Lsn {
    let ranges = [RedoRange {
        offset: 64,
        bytes: b"after",
    }];
    let pages = [PageRedo {
        page: PageId(page),
        zeroed: false,
        ranges: &ranges,
    }];
    (log as &dyn PageLog).log_redo(&pages)
}

fn kinds(log: &LogManager) -> Vec<String> {
    log.iter_from(log.first_lsn())
        .map(|r| {
            let (_, record) = r.unwrap();
            match record {
                LogRecord::Update { payload, .. } => format!("update {}", payload[0]),
                LogRecord::PageRedo { pages } => format!("redo {}", pages[0].page.0),
                other => format!("{other:?}"),
            }
        })
        .collect()
}

#[test]
fn the_next_record_carries_a_held_update_ahead_of_it() {
    let log = open(LogMode::Durable);
    let cell = AtomicU64::new(0);
    let held = unsafe { log.hold_update_publishing(TxnId(7), Lsn::NONE, &[1], Some(&cell)) };
    // Held: nothing in the log yet, and the cell still names no record.
    assert_eq!(log.stats().records, 0);
    assert_eq!(cell.load(Ordering::Relaxed), 0);
    let before = log.end_lsn();
    let r = redo(&log, 3);
    let u = held.settle();
    // Both went in, the update first, right before the redo record.
    assert_eq!(u, before);
    assert!(r > u);
    assert_eq!(log.stats().records, 2);
    assert_eq!(cell.load(Ordering::Relaxed), u.0);
    assert_eq!(kinds(&log), ["update 1", "redo 3"]);
    assert_eq!(
        log.read(u).unwrap(),
        LogRecord::Update {
            txn: TxnId(7),
            prev: Lsn::NONE,
            payload: vec![1]
        }
    );
    log.check_invariants();
}

#[test]
fn settling_with_nothing_appended_appends_it_alone() {
    let log = open(LogMode::Durable);
    let cell = AtomicU64::new(0);
    let held = unsafe { log.hold_update_publishing(TxnId(1), Lsn::NONE, &[2], Some(&cell)) };
    let u = held.settle();
    assert_eq!(log.stats().records, 1);
    assert_eq!(cell.load(Ordering::Relaxed), u.0);
    // The slot is free again: the next hold starts clean and is carried as before.
    let held = unsafe { log.hold_update_publishing(TxnId(1), u, &[3], Some(&cell)) };
    let r = redo(&log, 4);
    let v = held.settle();
    assert!(u < v && v < r);
    assert_eq!(kinds(&log), ["update 2", "update 3", "redo 4"]);
}

#[test]
fn dropping_it_unsettled_still_logs_it() {
    let log = open(LogMode::Durable);
    {
        let _held = unsafe { log.hold_update_publishing(TxnId(1), Lsn::NONE, &[5], None) };
    }
    assert_eq!(kinds(&log), ["update 5"]);
    // And a record of another log on the same thread does not carry it.
    let other = open(LogMode::Durable);
    let held = unsafe { log.hold_update_publishing(TxnId(1), Lsn::NONE, &[6], None) };
    redo(&other, 9);
    assert_eq!(kinds(&other), ["redo 9"]);
    assert_eq!(kinds(&log), ["update 5"]);
    redo(&log, 8);
    held.settle();
    assert_eq!(kinds(&log), ["update 5", "update 6", "redo 8"]);
}

#[test]
fn lsn_only_appends_at_once() {
    let log = open(LogMode::LsnOnly);
    let cell = AtomicU64::new(0);
    let held = unsafe { log.hold_update_publishing(TxnId(1), Lsn::NONE, &[1], Some(&cell)) };
    let first = cell.load(Ordering::Relaxed);
    let u = held.settle();
    assert_eq!(u.0, first);
    assert!(log.end_lsn() > u);
}

#[test]
#[should_panic(expected = "one update record at a time")]
fn a_second_hold_before_settling_is_refused() {
    let log = open(LogMode::Durable);
    let _a = unsafe { log.hold_update_publishing(TxnId(1), Lsn::NONE, &[1], None) };
    let _b = unsafe { log.hold_update_publishing(TxnId(1), Lsn::NONE, &[2], None) };
}

/// Many threads, each holding an update and then appending its redo: every update lies
/// directly before its own redo record, whatever the others append meanwhile.
#[test]
fn under_concurrency_each_update_stays_next_to_its_redo() {
    let log = Arc::new(open(LogMode::NoForce));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let log = log.clone();
            std::thread::spawn(move || {
                let cell = AtomicU64::new(0);
                let mut prev = Lsn::NONE;
                for i in 0..2000u64 {
                    let held = unsafe {
                        log.hold_update_publishing(TxnId(t), prev, &[t as u8], Some(&cell))
                    };
                    let r = redo(&log, t * 100_000 + i);
                    prev = held.settle();
                    assert!(prev < r);
                    assert_eq!(cell.load(Ordering::Relaxed), prev.0);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let records: Vec<_> = log
        .iter_from(log.first_lsn())
        .map(|r| r.unwrap().1)
        .collect();
    assert_eq!(records.len(), 4 * 2000 * 2);
    for pair in records.chunks(2) {
        let (LogRecord::Update { payload, .. }, LogRecord::PageRedo { pages }) =
            (&pair[0], &pair[1])
        else {
            panic!("an update not followed by its redo: {pair:?}");
        };
        assert_eq!(pages[0].page.0 / 100_000, u64::from(payload[0]));
    }
    log.check_invariants();
}
