//! Log micro-benchmarks: the append hot path (`append_update` of a 100-byte payload) in each
//! mode, and commit with and without forcing the log (the ladder's `disk-log` rung).
//!
//! Appends that do not sync go to a storage that discards writes, so the benchmark measures
//! building and buffering records rather than memory growth; the durable commit uses a real
//! temporary file and few samples (each is an fsync).

use std::hint::black_box;
use std::io;

use criterion::{criterion_group, criterion_main, Criterion};
use storage::Lsn;
use wal::{FileLogStorage, LogConfig, LogManager, LogMode, LogStorage, TxnId};

/// Accepts and forgets every write; reads see only the header it was given.
struct DiscardStorage {
    header: parking_lot::Mutex<Vec<u8>>,
}

impl LogStorage for DiscardStorage {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let header = self.header.lock();
        let start = (offset as usize).min(header.len());
        let n = buf.len().min(header.len() - start);
        buf[..n].copy_from_slice(&header[start..start + n]);
        Ok(n)
    }
    fn write_at(&self, offset: u64, bytes: &[u8]) -> io::Result<()> {
        if offset == 0 {
            *self.header.lock() = bytes.to_vec();
        }
        Ok(())
    }
    fn sync(&self) -> io::Result<()> {
        Ok(())
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.header.lock().len() as u64)
    }
    fn truncate(&self, _len: u64) -> io::Result<()> {
        Ok(())
    }
    fn read_master(&self) -> io::Result<Option<Vec<u8>>> {
        Ok(None)
    }
    fn write_master(&self, _bytes: &[u8]) -> io::Result<()> {
        Ok(())
    }
}

fn discard_log(mode: LogMode) -> LogManager {
    let storage = DiscardStorage {
        header: parking_lot::Mutex::new(Vec::new()),
    };
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
    LogManager::open(Box::new(storage), config).unwrap().0
}

fn append_update(c: &mut Criterion) {
    let payload = [0x5Au8; 100];
    for mode in [LogMode::Durable, LogMode::NoForce, LogMode::LsnOnly] {
        let log = discard_log(mode);
        let mut prev = Lsn::NONE;
        c.bench_function(&format!("log/append_update_100B/{mode:?}"), |b| {
            b.iter(|| {
                let lsn = log.append_update(TxnId(1), prev, black_box(&payload));
                assert!(lsn > prev);
                prev = lsn;
                lsn
            })
        });
        if mode != LogMode::LsnOnly {
            assert!(log.stats().bytes > 0);
        }
    }
}

fn commit_no_force(c: &mut Criterion) {
    let log = discard_log(LogMode::NoForce);
    let mut txn = 0u64;
    c.bench_function("log/commit/NoForce", |b| {
        b.iter(|| {
            txn += 1;
            log.commit(TxnId(txn), Lsn(16)).unwrap()
        })
    });
    assert_eq!(log.stats().syncs, 0);
}

fn commit_durable(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let storage = FileLogStorage::open(dir.path().join("bench.log")).unwrap();
    let log = LogManager::open(Box::new(storage), LogConfig::default())
        .unwrap()
        .0;
    let mut group = c.benchmark_group("log/commit");
    group.sample_size(10);
    let mut txn = 0u64;
    group.bench_function("Durable_file", |b| {
        b.iter(|| {
            txn += 1;
            let lsn = log.commit(TxnId(txn), Lsn(16)).unwrap();
            assert!(log.durable_lsn() > lsn);
            lsn
        })
    });
    group.finish();
}

criterion_group!(benches, append_update, commit_no_force, commit_durable);
criterion_main!(benches);
