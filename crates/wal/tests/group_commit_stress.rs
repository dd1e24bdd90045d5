//! Stress of the log's append path and group commit: many threads append and commit at once
//! while crashes are simulated at random moments (`MemLogStorage::crash_image`, the disk as
//! a crash would leave it: everything synced, plus a random part of the unsynced tail).
//! Every commit acknowledged before a crash must be in the log recovered from its image,
//! intact and in its transaction's chain; and the forces must group (fewer forces than
//! commits once threads wait together).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use storage::Lsn;
use wal::{LogConfig, LogManager, LogMode, LogRecord, LogStorage, MemLogStorage, TxnId};

/// A memory log whose sync takes as long as a disk's (200 µs), so that commits arriving
/// during a force wait for the next one together, as on a disk. Like `fdatasync`, a sync
/// makes durable what was written before it began, not what arrives while it runs: a log
/// that counted a later write durable would lose acknowledged commits in the crash images.
struct SlowSync(MemLogStorage);

impl LogStorage for SlowSync {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, bytes: &[u8]) -> std::io::Result<()> {
        self.0.write_at(offset, bytes)
    }
    fn sync(&self) -> std::io::Result<()> {
        let written = self.0.len()?;
        std::thread::sleep(std::time::Duration::from_micros(200));
        self.0.sync_upto(written);
        Ok(())
    }
    fn len(&self) -> std::io::Result<u64> {
        self.0.len()
    }
    fn truncate(&self, len: u64) -> std::io::Result<()> {
        self.0.truncate(len)
    }
    fn read_master(&self) -> std::io::Result<Option<Vec<u8>>> {
        self.0.read_master()
    }
    fn write_master(&self, bytes: &[u8]) -> std::io::Result<()> {
        self.0.write_master(bytes)
    }
}

const THREADS: u64 = 8;
const TXNS_PER_THREAD: u64 = 400;
const CRASHES: usize = 12;

/// One acknowledged commit: its transaction and the LSNs of its records, commit last.
#[derive(Clone, Debug)]
struct Acked {
    txn: u64,
    records: Vec<Lsn>,
}

#[test]
fn every_acknowledged_commit_survives_crashes_taken_while_threads_commit() {
    let storage = MemLogStorage::new();
    let (log, _) = LogManager::open(
        Box::new(SlowSync(storage.clone())),
        LogConfig {
            mode: LogMode::Durable,
            // Small, so appenders also write full buffers out while commits force.
            buffer_bytes: 4096,
            accept_loss: false,
            latching: true,
            gather_commits: true,
            runs: true,
            run_bytes: wal::RUN_BYTES,
            sync_write_back: true,
        },
    )
    .unwrap();
    let log = Arc::new(log);
    let acked: Arc<Vec<Mutex<Vec<Acked>>>> =
        Arc::new((0..THREADS).map(|_| Mutex::new(Vec::new())).collect());
    let done = Arc::new(AtomicBool::new(false));

    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (log, acked) = (log.clone(), acked.clone());
            std::thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(t);
                for n in 0..TXNS_PER_THREAD {
                    let txn = TxnId(1 + t + n * THREADS);
                    let mut prev = Lsn::NONE;
                    let mut records = Vec::new();
                    for r in 0..rng.gen_range(1..6) {
                        let payload = vec![(t + r) as u8; rng.gen_range(1..300)];
                        prev = log.append_update(txn, prev, &payload);
                        records.push(prev);
                    }
                    let commit = log.commit(txn, prev).expect("commit");
                    records.push(commit);
                    acked[t as usize].lock().push(Acked {
                        txn: txn.0,
                        records,
                    });
                }
            })
        })
        .collect();

    // The crasher: at random moments, note what is acknowledged so far, then take the image.
    let crasher = {
        let (storage, acked, done) = (storage.clone(), acked.clone(), done.clone());
        std::thread::spawn(move || {
            let mut rng = SmallRng::seed_from_u64(99);
            let mut images = Vec::new();
            while images.len() < CRASHES && !done.load(Ordering::Relaxed) {
                std::thread::sleep(std::time::Duration::from_micros(rng.gen_range(200..3000)));
                let before: Vec<Acked> = acked.iter().flat_map(|a| a.lock().clone()).collect();
                let image = storage.crash_image(rng.gen_range(0..2048));
                images.push((before, image));
            }
            images
        })
    };
    for w in workers {
        w.join().unwrap();
    }
    done.store(true, Ordering::Relaxed);
    let mut images = crasher.join().unwrap();
    // And one after every thread finished: all of them must be there.
    let all: Vec<Acked> = acked.iter().flat_map(|a| a.lock().clone()).collect();
    assert_eq!(all.len() as u64, THREADS * TXNS_PER_THREAD);
    images.push((all, storage.crash_image(0)));

    for (i, (before, image)) in images.into_iter().enumerate() {
        let (recovered, report) = LogManager::open(
            Box::new(image),
            LogConfig {
                mode: LogMode::Durable,
                ..LogConfig::default()
            },
        )
        .unwrap_or_else(|e| panic!("image {i} does not open: {e}"));
        assert!(report.damage.is_none(), "image {i}: {:?}", report.damage);
        let present: HashMap<Lsn, LogRecord> = recovered
            .iter_from(recovered.first_lsn())
            .map(|r| r.unwrap())
            .collect();
        let committed: HashSet<u64> = present
            .values()
            .filter_map(|r| match r {
                LogRecord::Commit { txn, .. } => Some(txn.0),
                _ => None,
            })
            .collect();
        for a in &before {
            assert!(
                committed.contains(&a.txn),
                "image {i}: acknowledged commit of txn {} lost",
                a.txn
            );
            for lsn in &a.records {
                assert!(
                    present.contains_key(lsn),
                    "image {i}: record {lsn} of acknowledged txn {} lost",
                    a.txn
                );
            }
        }
        recovered.check_invariants();
    }

    let stats = log.stats();
    assert_eq!(stats.commits, THREADS * TXNS_PER_THREAD);
    // Eight threads wait through each 200 µs force together: far fewer forces than commits.
    assert!(
        stats.commit_batches * 2 < stats.commits,
        "forces do not group: {stats:?}"
    );
    log.check_invariants();
}

/// A durable log over [`SlowSync`], gathering or not.
fn slow_log(gather_commits: bool) -> Arc<LogManager> {
    let (log, _) = LogManager::open(
        Box::new(SlowSync(MemLogStorage::new())),
        LogConfig {
            gather_commits,
            ..LogConfig::default()
        },
    )
    .unwrap();
    Arc::new(log)
}

/// `threads` threads commit `each` one-update transactions (ids apart per thread).
fn commit_concurrently(log: &Arc<LogManager>, threads: u64, each: u64) {
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let log = log.clone();
            std::thread::spawn(move || {
                for i in 0..each {
                    let txn = TxnId(1 + t * each + i);
                    let prev = log.append_update(txn, Lsn::NONE, &[t as u8; 40]);
                    log.commit(txn, prev).expect("commit");
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
}

#[test]
fn a_leader_gathers_the_committers_it_expects_and_only_when_told_to() {
    for gather in [true, false] {
        let log = slow_log(gather);
        commit_concurrently(&log, 4, 100);
        let stats = log.stats();
        assert_eq!(stats.commits, 400);
        assert!(
            stats.commit_batches < stats.commits,
            "gather {gather}: {stats:?}"
        );
        // Four threads commit in a loop: leaders see more committers than themselves.
        assert_eq!(stats.gathers > 0, gather, "{stats:?}");
        assert_eq!(stats.gather_ns > 0, gather, "{stats:?}");
    }
}

#[test]
fn a_lone_committer_stops_waiting_for_committers_that_left() {
    let log = slow_log(true);
    commit_concurrently(&log, 4, 50);
    let before = log.stats();
    // The four threads are gone. Their bits stay in the two windows behind the next two
    // syncs at most, so at most two of these forces gather (each for at most a force's time).
    for i in 0..10 {
        let txn = TxnId(10_000 + i);
        let prev = log.append_update(txn, Lsn::NONE, &[9; 40]);
        log.commit(txn, prev).unwrap();
    }
    let after = log.stats();
    assert_eq!(after.commits - before.commits, 10);
    assert!(after.gathers - before.gathers <= 2, "{before:?} {after:?}");
}
