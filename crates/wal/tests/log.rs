//! Log manager tests: reading back, forward scans, modes, group commit, checkpoints' master
//! record, and crash images through the simulated disk of `MemLogStorage`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use proptest::prelude::*;
use storage::page::{PageRedo, RedoRange};
use storage::{Lsn, PageId, PageLog};
use wal::{
    ActiveTxn, FileLogStorage, LogConfig, LogManager, LogMode, LogRecord, LogStorage,
    MemLogStorage, PageRedoOwned, TxnId, WalError,
};

fn config(mode: LogMode, buffer_bytes: usize) -> LogConfig {
    LogConfig {
        mode,
        buffer_bytes,
        accept_loss: false,
        latching: true,
        gather_commits: true,
        runs: true,
        run_bytes: wal::RUN_BYTES,
        sync_write_back: true,
    }
}

fn open_mem(storage: &MemLogStorage, cfg: LogConfig) -> LogManager {
    let (log, _) = LogManager::open(Box::new(storage.clone()), cfg).unwrap();
    log
}

fn update(txn: u64, prev: Lsn, payload: &[u8]) -> LogRecord {
    LogRecord::Update {
        txn: TxnId(txn),
        prev,
        payload: payload.to_vec(),
    }
}

#[test]
fn empty_log_starts_past_the_header() {
    let storage = MemLogStorage::new();
    let (log, report) = LogManager::open(Box::new(storage.clone()), LogConfig::default()).unwrap();
    assert!(report.created);
    assert_eq!(report.records, 0);
    assert_eq!(log.first_lsn(), Lsn(16));
    assert_eq!(log.end_lsn(), Lsn(16));
    assert_ne!(log.first_lsn(), Lsn::NONE);
    assert_eq!(storage.bytes().len(), 16);
    assert!(log.iter_from(log.first_lsn()).next().is_none());
    log.check_invariants();
}

#[test]
fn reads_buffered_written_and_synced_records() {
    let storage = MemLogStorage::new();
    let log = open_mem(&storage, config(LogMode::Durable, 1 << 20));
    let a = log.append_update(TxnId(1), Lsn::NONE, b"first");
    let b = log.append_compensation(TxnId(1), a, Lsn::NONE, b"undid first");
    assert!(a.0 >= 16 && b > a);
    // Both are still buffered.
    assert_eq!(storage.bytes().len(), 16);
    assert_eq!(log.read(a).unwrap(), update(1, Lsn::NONE, b"first"));
    let c = log.commit(TxnId(1), b).unwrap();
    assert!(log.durable_lsn() > c);
    assert!(storage.bytes().len() as u64 > c.0);
    // Now on storage.
    assert_eq!(log.read(a).unwrap(), update(1, Lsn::NONE, b"first"));
    assert_eq!(
        log.read(b).unwrap(),
        LogRecord::Compensation {
            txn: TxnId(1),
            prev: a,
            undo_next: Lsn::NONE,
            payload: b"undid first".to_vec()
        }
    );
    assert_eq!(
        log.read(c).unwrap(),
        LogRecord::Commit {
            txn: TxnId(1),
            prev: b
        }
    );
    // Positions that are not records are errors, not wrong records.
    assert!(matches!(log.read(Lsn(3)), Err(WalError::OutOfRange { .. })));
    assert!(matches!(
        log.read(log.end_lsn()),
        Err(WalError::OutOfRange { .. })
    ));
    assert!(log.read(Lsn(a.0 + 1)).is_err());
    log.check_invariants();
}

#[test]
fn follows_a_prev_chain_across_storage_and_buffer() {
    let storage = MemLogStorage::new();
    // A tiny buffer: most records are written out by the appenders that fill it.
    let log = open_mem(&storage, config(LogMode::Durable, 128));
    let mut prev = Lsn::NONE;
    let mut lsns = Vec::new();
    for i in 0..200u32 {
        prev = log.append_update(TxnId(9), prev, &i.to_le_bytes());
        lsns.push(prev);
    }
    assert!(log.stats().writes > 10);
    assert_eq!(log.stats().syncs, 0);
    // Undo walks backwards through storage and buffer alike.
    let mut at = prev;
    let mut seen = 0u32;
    while at != Lsn::NONE {
        let record = log.read(at).unwrap();
        let LogRecord::Update { txn, prev, payload } = record else {
            panic!("not an update at {at}");
        };
        assert_eq!(txn, TxnId(9));
        assert_eq!(payload, (199 - seen).to_le_bytes());
        seen += 1;
        at = prev;
    }
    assert_eq!(seen, 200);
    log.check_invariants();
}

#[test]
fn iter_from_scans_forward_from_any_record() {
    let storage = MemLogStorage::new();
    let log = open_mem(&storage, config(LogMode::Durable, 300));
    let mut expected = Vec::new();
    for i in 0..100u64 {
        let record = match i % 4 {
            0 => update(i, Lsn(i), &[i as u8; 40]),
            1 => LogRecord::CheckpointBegin,
            2 => LogRecord::Abort {
                txn: TxnId(i),
                prev: Lsn(7),
            },
            _ => LogRecord::PageRedo {
                pages: vec![PageRedoOwned {
                    page: PageId(i),
                    zeroed: i % 8 == 3,
                    ranges: vec![(24, vec![1; 10])],
                }],
            },
        };
        let lsn = log.append(&record);
        expected.push((lsn, record));
        if i == 50 {
            log.flush_to(lsn).unwrap();
        }
    }
    let all: Vec<_> = log.iter_from(log.first_lsn()).map(Result::unwrap).collect();
    assert_eq!(all, expected);
    let from_middle: Vec<_> = log.iter_from(expected[37].0).map(Result::unwrap).collect();
    assert_eq!(from_middle, expected[37..]);
    // The same scan after a reopen reads everything from storage.
    drop(log);
    let log = open_mem(&storage, config(LogMode::Durable, 300));
    let again: Vec<_> = log.iter_from(log.first_lsn()).map(Result::unwrap).collect();
    assert_eq!(again, expected);
    // A scan from the middle of a record fails and then stops.
    let mut bad = log.iter_from(Lsn(expected[3].0 .0 + 2));
    assert!(bad.next().unwrap().is_err());
    assert!(bad.next().is_none());
}

#[test]
fn page_log_redo_is_read_back_and_flush_to_syncs() {
    let storage = MemLogStorage::new();
    let log = open_mem(&storage, LogConfig::default());
    let pool_side: &dyn PageLog = &log;
    let ranges_a = [RedoRange {
        offset: 24,
        bytes: b"abc",
    }];
    let ranges_b = [
        RedoRange {
            offset: 100,
            bytes: b"defg",
        },
        RedoRange {
            offset: 8000,
            bytes: b"h",
        },
    ];
    let lsn = pool_side.log_redo(&[
        PageRedo {
            page: PageId(3),
            zeroed: false,
            ranges: &ranges_a,
        },
        PageRedo {
            page: PageId(4),
            zeroed: true,
            ranges: &ranges_b,
        },
    ]);
    assert_eq!(log.durable_lsn(), log.first_lsn());
    pool_side.flush_to(lsn).unwrap();
    assert!(log.durable_lsn() > lsn);
    assert_eq!(log.stats().syncs, 1);
    // Already durable: no second sync.
    pool_side.flush_to(lsn).unwrap();
    assert_eq!(log.stats().syncs, 1);
    assert_eq!(
        log.read(lsn).unwrap(),
        LogRecord::PageRedo {
            pages: vec![
                PageRedoOwned {
                    page: PageId(3),
                    zeroed: false,
                    ranges: vec![(24, b"abc".to_vec())],
                },
                PageRedoOwned {
                    page: PageId(4),
                    zeroed: true,
                    ranges: vec![(100, b"defg".to_vec()), (8000, b"h".to_vec())],
                },
            ]
        }
    );
}

#[test]
fn lsn_only_builds_no_bytes_yet_lsns_increase() {
    let storage = MemLogStorage::new();
    let log = open_mem(&storage, config(LogMode::LsnOnly, 1 << 20));
    let mut last = Lsn::NONE;
    for i in 0..1000u64 {
        let a = log.append_update(TxnId(i), last, &[0; 100]);
        let b = log.commit(TxnId(i), a).unwrap();
        assert!(a > last && b > a);
        last = b;
    }
    let redo = log.log_redo(&[]);
    assert!(redo > last);
    log.flush_to(redo).unwrap();
    let stats = log.stats();
    assert_eq!(stats.bytes, 0);
    assert_eq!(stats.records, 0);
    assert_eq!(stats.writes, 0);
    assert_eq!(stats.syncs, 0);
    assert_eq!(storage.bytes().len(), 16, "only the header on storage");
    assert!(matches!(log.read(last), Err(WalError::NotLogged)));
    assert!(matches!(
        log.iter_from(log.first_lsn()).next(),
        Some(Err(WalError::NotLogged))
    ));
    assert!(log.end_lsn() > redo);
    log.check_invariants();
}

/// `NoForce`: commits neither sync nor wait; full buffers are written, not synced. A
/// `flush_to` (the buffer pool's, before a page write-back) syncs, unless `sync_write_back` is
/// off (the ladder's `disk-log=off`), where it only writes.
#[test]
fn no_force_commits_never_sync_and_flush_to_syncs_unless_the_log_is_never_forced() {
    for sync_write_back in [true, false] {
        let storage = MemLogStorage::new();
        let log = open_mem(
            &storage,
            LogConfig {
                sync_write_back,
                ..config(LogMode::NoForce, 4096)
            },
        );
        let mut lsn = Lsn::NONE;
        for i in 0..2000u64 {
            let u = log.append_update(TxnId(i), Lsn::NONE, &[7; 50]);
            lsn = log.commit(TxnId(i), u).unwrap();
        }
        let stats = log.stats();
        assert_eq!(stats.syncs, 0);
        assert_eq!(stats.commits, 2000);
        assert!(stats.writes > 10, "full buffers are written: {stats:?}");
        assert_eq!(
            storage.crash_image(0).bytes().len(),
            16,
            "nothing synced yet"
        );
        log.flush_to(lsn).unwrap();
        let stats = log.stats();
        // flush_to writes everything, so a reader of the storage sees all records.
        assert_eq!(storage.bytes().len() as u64, log.end_lsn().0);
        assert_eq!(log.durable_lsn(), log.end_lsn());
        let crashed = storage.crash_image(0);
        if sync_write_back {
            assert_eq!(stats.syncs, 1);
            assert_eq!(stats.commit_batches, 1, "the sync carried the commits");
            assert_eq!(crashed.bytes().len() as u64, log.end_lsn().0);
        } else {
            assert_eq!(stats.syncs, 0);
            assert_eq!(stats.commit_batches, 0);
            assert_eq!(crashed.bytes().len(), 16, "a crash keeps only the header");
        }
        log.check_invariants();
    }
}

#[test]
fn durable_commit_survives_a_crash_and_unsynced_records_do_not() {
    let storage = MemLogStorage::new();
    let log = open_mem(&storage, LogConfig::default());
    let u = log.append_update(TxnId(1), Lsn::NONE, b"kept");
    let c = log.commit(TxnId(1), u).unwrap();
    let lost = log.append_update(TxnId(2), Lsn::NONE, b"lost");
    assert!(log.durable_lsn() <= lost);
    // Crash now: the disk holds what was synced.
    let (log2, report) = LogManager::open(
        Box::new(storage.crash_image(usize::MAX)),
        LogConfig::default(),
    )
    .unwrap();
    assert_eq!(report.end, lost, "the commit is the last record on disk");
    assert_eq!(report.cut_bytes, 0);
    assert_eq!(log2.read(u).unwrap(), update(1, Lsn::NONE, b"kept"));
    assert!(matches!(log2.read(c).unwrap(), LogRecord::Commit { .. }));
    assert!(matches!(log2.read(lost), Err(WalError::OutOfRange { .. })));
    // Appends continue where the intact log ends, and a reopen reads them.
    let next = log2.append_update(TxnId(3), Lsn::NONE, b"after");
    assert_eq!(next, lost);
    log2.flush_to(next).unwrap();
    drop(log);
}

#[test]
fn crash_images_with_torn_tails_recover_to_a_record_boundary() {
    let storage = MemLogStorage::new();
    let never_forced = LogConfig {
        sync_write_back: false,
        ..config(LogMode::NoForce, 1 << 20)
    };
    let log = open_mem(&storage, never_forced);
    let mut lsns = Vec::new();
    for i in 0..20u64 {
        lsns.push(log.append_update(TxnId(i), Lsn::NONE, &[i as u8; 30]));
    }
    log.flush_to(Lsn(u64::MAX)).unwrap();
    let end = log.end_lsn().0;
    drop(log);
    // The log was written but never synced: every prefix is a possible crash image.
    for kept in 0..=(end - 16) as usize {
        let image = storage.crash_image(kept);
        let (log, report) =
            LogManager::open(Box::new(image.clone()), LogConfig::default()).unwrap();
        let intact = lsns
            .iter()
            .chain(std::iter::once(&Lsn(end)))
            .take_while(|l| l.0 <= 16 + kept as u64)
            .last()
            .copied()
            .unwrap_or(Lsn(16));
        assert_eq!(report.end, intact, "kept {kept}");
        assert_eq!(report.cut_bytes, 16 + kept as u64 - intact.0);
        assert_eq!(image.bytes().len() as u64, intact.0);
        log.check_invariants();
    }
}

#[test]
fn checkpoint_master_is_kept_in_memory_storage() {
    let storage = MemLogStorage::new();
    let log = open_mem(&storage, LogConfig::default());
    assert_eq!(log.last_checkpoint(), None);
    let begin = log.append(&LogRecord::CheckpointBegin);
    log.append(&LogRecord::CheckpointEnd {
        begin,
        active: vec![ActiveTxn {
            txn: TxnId(4),
            last_lsn: Lsn(16),
            committed: false,
        }],
        dirty: vec![(PageId(2), Lsn(16))],
        meta: b"next txn 5".to_vec(),
    });
    log.set_checkpoint(begin).unwrap();
    assert_eq!(log.last_checkpoint(), Some(begin));
    // The master never names a checkpoint a crash could lose: the log was synced first.
    let (reopened, report) =
        LogManager::open(Box::new(storage.crash_image(0)), LogConfig::default()).unwrap();
    assert_eq!(report.checkpoint, Some(begin));
    assert_eq!(reopened.last_checkpoint(), Some(begin));
    assert!(!report.master_ignored);
    // A master naming something that is not a CheckpointBegin is rejected.
    assert!(matches!(
        log.set_checkpoint(log.end_lsn()),
        Err(WalError::OutOfRange { .. })
    ));
}

#[test]
fn group_commit_eight_threads_share_syncs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wal.log");
    let storage = FileLogStorage::open(&path).unwrap();
    let (log, _) = LogManager::open(Box::new(storage), LogConfig::default()).unwrap();
    let log = Arc::new(log);
    const THREADS: u64 = 8;
    const COMMITS: u64 = 200;
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let log = log.clone();
            std::thread::spawn(move || {
                for i in 0..COMMITS {
                    let txn = TxnId(t * 1000 + i);
                    let u = log.append_update(txn, Lsn::NONE, &[t as u8; 100]);
                    let c = log.commit(txn, u).unwrap();
                    assert!(
                        log.durable_lsn() > c,
                        "commit returned before it was durable"
                    );
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    log.check_invariants();
    let stats = log.stats();
    eprintln!("group commit: {stats:?}");
    assert_eq!(stats.commits, THREADS * COMMITS);
    assert!(
        stats.syncs < stats.commits,
        "group commit shares syncs: {stats:?}"
    );
    assert!(stats.commit_batches <= stats.syncs);
    drop(log);
    // Every commit is on disk after reopening.
    let (log, report) = LogManager::open(
        Box::new(FileLogStorage::open(&path).unwrap()),
        LogConfig::default(),
    )
    .unwrap();
    assert_eq!(report.cut_bytes, 0);
    assert_eq!(report.records, 2 * THREADS * COMMITS);
    let commits = log
        .iter_from(log.first_lsn())
        .map(Result::unwrap)
        .filter(|(_, r)| matches!(r, LogRecord::Commit { .. }))
        .count() as u64;
    assert_eq!(commits, THREADS * COMMITS);
}

#[test]
fn concurrent_appends_reads_and_flushes_keep_invariants() {
    let storage = MemLogStorage::new();
    let log = Arc::new(open_mem(&storage, config(LogMode::Durable, 2048)));
    let handles: Vec<_> = (0..4u64)
        .map(|t| {
            let log = log.clone();
            std::thread::spawn(move || {
                let mut prev = Lsn::NONE;
                for i in 0..500u64 {
                    let payload = (t << 32 | i).to_le_bytes();
                    prev = log.append_update(TxnId(t), prev, &payload);
                    // Read back while writers move the bytes from buffer to storage.
                    assert_eq!(
                        log.read(prev).unwrap(),
                        update(t, log_prev(&log, prev), &payload)
                    );
                    if i % 50 == 0 {
                        log.commit(TxnId(t), prev).unwrap();
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    log.check_invariants();
    assert_eq!(
        log.iter_from(log.first_lsn()).count() as u64,
        log.stats().records
    );
}

/// The `prev` stored in the update at `lsn` (read separately to test reading twice).
fn log_prev(log: &LogManager, lsn: Lsn) -> Lsn {
    log.read(lsn).unwrap().prev().unwrap()
}

#[derive(Clone, Debug)]
enum Op {
    Append(LogRecord),
    Commit(u64),
    Flush,
    Crash(usize),
    /// A checkpoint, then a discard up to the record this fraction of the way from the start
    /// to the checkpoint's begin (the oldest record still needed).
    CheckpointDiscard(f64),
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (any::<u64>(), proptest::collection::vec(any::<u8>(), 0..80))
            .prop_map(|(t, p)| Op::Append(update(t, Lsn(t), &p))),
        1 => Just(Op::Append(LogRecord::CheckpointBegin)),
        2 => any::<u64>().prop_map(Op::Commit),
        1 => Just(Op::Flush),
        1 => (0usize..200).prop_map(Op::Crash),
        1 => (0.0f64..=1.0).prop_map(Op::CheckpointDiscard),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Model: the log is a list of records; a crash keeps a prefix that holds at least every
    /// record below the durable LSN, and the reopened log reads exactly that prefix from its
    /// start: a discard drops the model's records below it, and records below it read as
    /// discarded, before and after a crash.
    #[test]
    fn crash_model(ops in proptest::collection::vec(arb_op(), 1..60), buffer in 64usize..600) {
        let cfg = config(LogMode::Durable, buffer);
        let mut storage = MemLogStorage::new();
        let mut log = open_mem(&storage, cfg);
        let mut model: Vec<(Lsn, LogRecord)> = Vec::new();
        let mut dropped: Vec<Lsn> = Vec::new();
        for op in ops {
            match op {
                Op::Append(record) => {
                    let lsn = log.append(&record);
                    model.push((lsn, record));
                }
                Op::Commit(t) => {
                    let lsn = log.commit(TxnId(t), Lsn::NONE).unwrap();
                    prop_assert!(log.durable_lsn() > lsn);
                    model.push((lsn, LogRecord::Commit { txn: TxnId(t), prev: Lsn::NONE }));
                }
                Op::Flush => log.flush_to(log.end_lsn()).unwrap(),
                Op::CheckpointDiscard(fraction) => {
                    let begin = log.append(&LogRecord::CheckpointBegin);
                    model.push((begin, LogRecord::CheckpointBegin));
                    let end = LogRecord::CheckpointEnd {
                        begin,
                        active: vec![],
                        dirty: vec![],
                        meta: vec![],
                    };
                    model.push((log.append(&end), end));
                    log.set_checkpoint(begin).unwrap();
                    let below = model.iter().filter(|(l, _)| *l <= begin).count();
                    let keep_from = model[((below - 1) as f64 * fraction) as usize].0;
                    prop_assert_eq!(log.discard_before(keep_from).unwrap(), keep_from);
                    prop_assert_eq!(log.first_lsn(), keep_from);
                    let cut = model.iter().take_while(|(l, _)| *l < keep_from).count();
                    dropped.extend(model.drain(..cut).map(|(l, _)| l));
                }
                Op::Crash(kept) => {
                    let durable = log.durable_lsn();
                    log.check_invariants();
                    // A crash: the log manager vanishes without writing its buffer.
                    std::mem::forget(log);
                    storage = storage.crash_image(kept);
                    let (reopened, report) = LogManager::open(Box::new(storage.clone()), cfg).unwrap();
                    let survived: Vec<_> = reopened
                        .iter_from(reopened.first_lsn())
                        .collect::<Result<_, _>>()
                        .unwrap();
                    prop_assert!(survived.len() <= model.len());
                    prop_assert_eq!(&survived[..], &model[..survived.len()]);
                    let must_survive = model.iter().filter(|(l, _)| *l < durable).count();
                    prop_assert!(survived.len() >= must_survive);
                    prop_assert_eq!(report.records as usize, survived.len());
                    prop_assert_eq!(report.start, reopened.first_lsn());
                    model.truncate(survived.len());
                    log = reopened;
                }
            }
        }
        log.check_invariants();
        let all: Vec<_> = log.iter_from(log.first_lsn()).collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(all, model);
        let start = log.first_lsn();
        for lsn in dropped {
            prop_assert!(
                matches!(log.read(lsn), Err(WalError::Discarded { lsn: l, start: s }) if l == lsn && s == start),
                "read of discarded {} gave {:?}", lsn, log.read(lsn)
            );
        }
    }
}

#[test]
fn storage_trait_objects_are_usable_directly() {
    // The master file survives alongside the log file.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let storage: Box<dyn LogStorage> = Box::new(FileLogStorage::open(&path).unwrap());
    let (log, report) = LogManager::open(storage, LogConfig::default()).unwrap();
    assert!(report.created);
    let begin = log.append(&LogRecord::CheckpointBegin);
    log.append(&LogRecord::CheckpointEnd {
        begin,
        active: vec![],
        dirty: vec![],
        meta: vec![],
    });
    log.set_checkpoint(begin).unwrap();
    drop(log);
    let (log, report) = LogManager::open(
        Box::new(FileLogStorage::open(&path).unwrap()),
        LogConfig::default(),
    )
    .unwrap();
    assert_eq!(report.checkpoint, Some(begin));
    assert_eq!(log.last_checkpoint(), Some(begin));
    assert!(dir.path().join("log.master").exists());
}

/// A storage whose writes or syncs start failing on demand.
struct FlakyStorage {
    inner: MemLogStorage,
    fail_writes: Arc<AtomicBool>,
    fail_syncs: Arc<AtomicBool>,
}

impl LogStorage for FlakyStorage {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        self.inner.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, bytes: &[u8]) -> std::io::Result<()> {
        if self.fail_writes.load(Ordering::Relaxed) {
            return Err(std::io::Error::other("disk full"));
        }
        self.inner.write_at(offset, bytes)
    }
    fn sync(&self) -> std::io::Result<()> {
        if self.fail_syncs.load(Ordering::Relaxed) {
            return Err(std::io::Error::other("fsync failed"));
        }
        self.inner.sync()
    }
    fn len(&self) -> std::io::Result<u64> {
        self.inner.len()
    }
    fn truncate(&self, len: u64) -> std::io::Result<()> {
        self.inner.truncate(len)
    }
    fn read_master(&self) -> std::io::Result<Option<Vec<u8>>> {
        self.inner.read_master()
    }
    fn write_master(&self, bytes: &[u8]) -> std::io::Result<()> {
        self.inner.write_master(bytes)
    }
}

/// A log over a flaky storage, and the switches that make its writes and syncs fail.
fn flaky_log() -> (LogManager, Arc<AtomicBool>, Arc<AtomicBool>) {
    let fail_writes = Arc::new(AtomicBool::new(false));
    let fail_syncs = Arc::new(AtomicBool::new(false));
    let storage = FlakyStorage {
        inner: MemLogStorage::new(),
        fail_writes: fail_writes.clone(),
        fail_syncs: fail_syncs.clone(),
    };
    let (log, _) = LogManager::open(Box::new(storage), LogConfig::default()).unwrap();
    (log, fail_writes, fail_syncs)
}

#[test]
fn a_failed_write_fails_every_later_commit_but_records_stay_readable() {
    let (log, fail_writes, _) = flaky_log();
    let ok = log.commit(TxnId(1), Lsn::NONE).unwrap();
    fail_writes.store(true, Ordering::Relaxed);
    let u = log.append_update(TxnId(2), Lsn::NONE, b"kept in memory");
    let err = log.commit(TxnId(2), u).unwrap_err();
    assert!(matches!(err, WalError::Io { .. }), "{err}");
    assert!(matches!(
        log.commit(TxnId(3), Lsn::NONE),
        Err(WalError::Failed { .. })
    ));
    assert!(matches!(log.flush_to(u), Err(WalError::Failed { .. })));
    // The buffer pool sees the failure as a storage I/O error (the WAL rule cannot hold).
    assert!(matches!(
        PageLog::flush_to(&log, u),
        Err(storage::StorageError::Io { .. })
    ));
    // What could not be written is still readable (undo can still run), and so is the rest.
    assert_eq!(
        log.read(u).unwrap(),
        update(2, Lsn::NONE, b"kept in memory")
    );
    assert!(matches!(log.read(ok).unwrap(), LogRecord::Commit { .. }));
    assert_eq!(log.iter_from(log.first_lsn()).count(), 4);
    assert!(log.durable_lsn() <= u);
    log.check_invariants();
}

#[test]
fn a_failed_sync_fails_the_commit() {
    let (log, _, fail_syncs) = flaky_log();
    fail_syncs.store(true, Ordering::Relaxed);
    assert!(matches!(
        log.commit(TxnId(1), Lsn::NONE),
        Err(WalError::Io { .. })
    ));
    assert_eq!(log.durable_lsn(), log.first_lsn());
    assert!(matches!(
        log.commit(TxnId(2), Lsn::NONE),
        Err(WalError::Failed { .. })
    ));
    assert_eq!(log.stats().syncs, 0);
    log.check_invariants();
}

/// The checkpoint protocol's half in the log: a record appended before a `CheckpointBegin`
/// has its LSN in its transaction's cell by the time the begin's append returns. Writers append
/// updates publishing into their own cell; a checkpointer appends begins and reads every cell
/// right after. Scanning the log afterwards, each cell read must be at least the writer's last
/// LSN before that begin (storing the LSN after the append returned broke this).
#[test]
fn a_record_before_a_checkpoint_begin_is_published_when_the_begin_returns() {
    use std::sync::atomic::AtomicU64;
    const WRITERS: usize = 3;
    let storage = MemLogStorage::new();
    let log = Arc::new(open_mem(&storage, config(LogMode::NoForce, 1 << 16)));
    let cells: Arc<Vec<AtomicU64>> = Arc::new((0..WRITERS).map(|_| AtomicU64::new(0)).collect());
    let appended: Arc<Vec<AtomicU64>> = Arc::new((0..WRITERS).map(|_| AtomicU64::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (log, cells, appended, stop) =
                (log.clone(), cells.clone(), appended.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut prev = Lsn::NONE;
                while !stop.load(Ordering::Relaxed) {
                    prev = log.append_update_publishing(
                        TxnId(w as u64 + 1),
                        prev,
                        b"x",
                        Some(&cells[w]),
                    );
                    appended[w].fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    // Begins interleaved with every writer's records: at least 2000, and until each writer
    // has appended 200 (threads start late on a loaded machine), within a minute.
    let mut seen: Vec<(Lsn, Vec<u64>)> = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while seen.len() < 2000
        || (appended.iter().any(|a| a.load(Ordering::Relaxed) < 200)
            && std::time::Instant::now() < deadline)
    {
        let begin = log.append(&LogRecord::CheckpointBegin);
        let read = cells.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        seen.push((begin, read));
        if seen.len() >= 2000 {
            // Waiting for a late writer: slowly, so the log stays small.
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    log.flush_to(log.end_lsn()).unwrap();
    // Every writer's record LSNs, in log order.
    let mut by_writer: Vec<Vec<u64>> = vec![Vec::new(); WRITERS];
    for item in log.iter_from(log.first_lsn()) {
        let (lsn, rec) = item.unwrap();
        if let LogRecord::Update { txn, .. } = rec {
            by_writer[txn.0 as usize - 1].push(lsn.0);
        }
    }
    assert!(by_writer.iter().all(|r| r.len() > 100), "writers ran");
    for (begin, read) in &seen {
        for w in 0..WRITERS {
            let records = &by_writer[w];
            let before = records.partition_point(|l| *l < begin.0);
            let last_before = if before == 0 { 0 } else { records[before - 1] };
            assert!(
                read[w] >= last_before,
                "writer {w}: record {last_before} precedes the begin at {begin}, \
                 but its cell read {}",
                read[w]
            );
        }
    }
}

#[test]
fn end_reached_agrees_with_the_end_whatever_is_buffered() {
    for mode in [LogMode::Durable, LogMode::NoForce, LogMode::LsnOnly] {
        let storage = MemLogStorage::new();
        let log = open_mem(&storage, config(mode, 256));
        for n in 0..200u64 {
            let end = log.end_lsn();
            assert!(log.end_reached(end), "{mode:?}: the end itself");
            assert!(log.end_reached(Lsn(end.0.saturating_sub(n))), "{mode:?}");
            assert!(!log.end_reached(Lsn(end.0 + 1)), "{mode:?}: past the end");
            assert!(log.end_lower_bound() <= end, "{mode:?}");
            log.append_update(TxnId(1), Lsn::NONE, &vec![7; n as usize % 40]);
        }
    }
}

/// A record longer than the scan's 64 KiB chunk that begins a chunk (here the first record,
/// where the open's scan starts) was taken for the end of the log: the open cut it, and every
/// record after it, as a torn tail.
#[test]
fn a_record_longer_than_a_scan_chunk_survives_a_reopen() {
    let storage = MemLogStorage::new();
    let big = vec![7u8; 200_000];
    let (first, second) = {
        let log = open_mem(&storage, config(LogMode::Durable, 1 << 20));
        let first = log.append_update(TxnId(1), Lsn::NONE, &big);
        let second = log.commit(TxnId(1), first).unwrap();
        (first, second)
    };
    let (log, report) = LogManager::open(Box::new(storage.clone()), LogConfig::default()).unwrap();
    assert_eq!(report.records, 2);
    assert_eq!(report.cut_bytes, 0);
    assert_eq!(log.read(first).unwrap(), update(1, Lsn::NONE, &big));
    assert_eq!(
        log.iter_from(first)
            .map(|r| r.unwrap().0)
            .collect::<Vec<_>>(),
        [first, second]
    );
}
