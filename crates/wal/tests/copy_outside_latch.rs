//! Appenders reserve their bytes with a compare-and-swap on the log buffer's tail, without its
//! latch, and copy them in after: a writer that takes the buffer, a reader, a scan and a
//! buffer that grows must all seal the tail and wait for the copies into the bytes they touch. Many threads on a buffer so small that it is
//! taken (and grown, for the larger records) all the time, with a scanner beside them; every
//! record must be read back whole, in each thread's order.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use storage::Lsn;
use wal::{LogConfig, LogManager, LogMode, LogRecord, MemLogStorage, TxnId};

const THREADS: u64 = 8;
const RECORDS: u64 = 1000;

/// The payload of record `i` of thread `t`: its own bytes, from 1 byte to past the buffer.
fn payload(t: u64, i: u64) -> Vec<u8> {
    let len = match i % 7 {
        // Larger than the buffer, which grows; long to copy, which widens the window in
        // which a writer or reader could see the bytes half copied.
        0 => 200_000,
        n => (n * 13) as usize,
    };
    (0..len).map(|k| (t * 31 + i + k as u64) as u8).collect()
}

/// A log in memory, latched, with a buffer of `buffer_bytes`.
fn open_log(mode: LogMode, buffer_bytes: usize, gather_commits: bool) -> Arc<LogManager> {
    let config = LogConfig {
        mode,
        buffer_bytes,
        accept_loss: false,
        latching: true,
        gather_commits,
        runs: true,
        run_bytes: wal::RUN_BYTES,
        sync_write_back: true,
    };
    Arc::new(
        LogManager::open(Box::new(MemLogStorage::new()), config)
            .unwrap()
            .0,
    )
}

fn run(mode: LogMode) {
    let log = open_log(mode, 256, true);
    let done = Arc::new(AtomicBool::new(false));
    let scanner = {
        let (log, done) = (log.clone(), done.clone());
        std::thread::spawn(move || {
            let mut scans = 0;
            while !done.load(Ordering::Acquire) {
                for record in log.iter_from(log.first_lsn()) {
                    record.expect("every record reserved before the scan reads back whole");
                }
                scans += 1;
            }
            scans
        })
    };
    let appenders: Vec<_> = (0..THREADS)
        .map(|t| {
            let log = log.clone();
            std::thread::spawn(move || {
                let mut prev = Lsn::NONE;
                let mut mine = Vec::new();
                for i in 0..RECORDS {
                    let lsn = log.append_update(TxnId(t), prev, &payload(t, i));
                    if i % 97 == 0 {
                        // Read back a record of its own while others copy in beside it.
                        let back = log.read(lsn).unwrap();
                        assert!(matches!(back, LogRecord::Update { txn: TxnId(x), .. } if x == t));
                    }
                    if i % 50 == 0 {
                        log.commit(TxnId(t), lsn).unwrap();
                    }
                    mine.push(lsn);
                    prev = lsn;
                }
                mine
            })
        })
        .collect();
    let lsns: Vec<Vec<Lsn>> = appenders.into_iter().map(|a| a.join().unwrap()).collect();
    done.store(true, Ordering::Release);
    assert!(scanner.join().unwrap() > 0);
    log.flush_to(log.end_lsn()).unwrap();
    log.check_invariants();
    // Each thread's records: in its order, its bytes, its chain.
    for (t, mine) in lsns.iter().enumerate() {
        let t = t as u64;
        let mut prev = Lsn::NONE;
        for (i, &lsn) in mine.iter().enumerate() {
            assert_eq!(
                log.read(lsn).unwrap(),
                LogRecord::Update {
                    txn: TxnId(t),
                    prev,
                    payload: payload(t, i as u64)
                }
            );
            prev = lsn;
        }
    }
    let records = log.iter_from(log.first_lsn()).count() as u64;
    assert_eq!(records, log.stats().records);
    assert_eq!(records, THREADS * RECORDS + THREADS * RECORDS.div_ceil(50));
}

#[test]
fn copies_outside_the_latch_are_whole_when_written_read_or_scanned_durable() {
    run(LogMode::Durable);
}

#[test]
fn copies_outside_the_latch_are_whole_when_written_read_or_scanned_no_force() {
    run(LogMode::NoForce);
}

/// A checkpoint's begin is a barrier: once it is appended, every transaction's last-LSN cell
/// names its records before the begin. An append without the latch publishes its LSN after
/// reserving it, so a begin reserved meanwhile must wait for that. Appenders publish into
/// their cells while a checkpointer appends begins and reads the cells at once; afterwards, no
/// record of a thread may lie between what the checkpointer read and the begin.
#[test]
fn a_checkpoint_begin_sees_every_earlier_record_published() {
    const APPENDERS: usize = 6;
    const PER_THREAD: u64 = 4000;
    let log = open_log(LogMode::NoForce, 4096, false);
    let cells: Arc<Vec<AtomicU64>> = Arc::new((0..APPENDERS).map(|_| AtomicU64::new(0)).collect());
    let done = Arc::new(AtomicBool::new(false));
    let checkpointer = {
        let (log, cells, done) = (log.clone(), cells.clone(), done.clone());
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            while !done.load(Ordering::Acquire) {
                let begin = log.append(&LogRecord::CheckpointBegin);
                let read: Vec<u64> = cells.iter().map(|c| c.load(Ordering::Relaxed)).collect();
                seen.push((begin, read));
            }
            seen
        })
    };
    let appenders: Vec<_> = (0..APPENDERS)
        .map(|t| {
            let (log, cells) = (log.clone(), cells.clone());
            std::thread::spawn(move || {
                let mut prev = Lsn::NONE;
                let mut mine = Vec::new();
                for i in 0..PER_THREAD {
                    let payload = payload(t as u64, i % 7 + 1);
                    prev = log.append_update_publishing(
                        TxnId(t as u64),
                        prev,
                        &payload,
                        Some(&cells[t]),
                    );
                    mine.push(prev.0);
                }
                mine
            })
        })
        .collect();
    let lsns: Vec<Vec<u64>> = appenders.into_iter().map(|a| a.join().unwrap()).collect();
    done.store(true, Ordering::Release);
    let seen = checkpointer.join().unwrap();
    assert!(!seen.is_empty());
    log.check_invariants();
    for (begin, read) in &seen {
        for (t, mine) in lsns.iter().enumerate() {
            // The thread's last record before the begin; the cell must name it (or a later one).
            // (A thread's LSNs rise.)
            let below = mine.partition_point(|&l| l < begin.0);
            let before = below.checked_sub(1).map_or(0, |i| mine[i]);
            assert!(
                read[t] >= before,
                "thread {t}: record {before} precedes the begin {begin} but its cell read {}",
                read[t]
            );
        }
    }
}
