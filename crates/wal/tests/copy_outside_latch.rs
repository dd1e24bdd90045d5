//! Appenders reserve their bytes under the log buffer latch and copy them in after releasing
//! it: a writer that takes the buffer, a reader, a scan and a buffer that grows must all wait
//! for the copies into the bytes they touch. Many threads on a buffer so small that it is
//! taken (and grown, for the larger records) all the time, with a scanner beside them; every
//! record must be read back whole, in each thread's order.

use std::sync::atomic::{AtomicBool, Ordering};
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

fn run(mode: LogMode) {
    let config = LogConfig {
        mode,
        buffer_bytes: 256,
        accept_loss: false,
        latching: true,
        gather_commits: true,
    };
    let log = Arc::new(
        LogManager::open(Box::new(MemLogStorage::new()), config)
            .unwrap()
            .0,
    );
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
