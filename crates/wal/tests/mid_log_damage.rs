//! Damage in the middle of the log is never taken for its end: a bad frame with intact records
//! after it fails the open with [`WalError::Damaged`], naming its LSN and what follows it,
//! and cuts nothing; with `accept_loss` the log is cut there and the loss reported. What a
//! crash leaves stays a quiet torn tail: a cut file, garbage or zeros to the end, and after a
//! power loss, unwritten (zero) sectors in the unsynced tail with intact frames after them.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;

use rand::{Rng, SeedableRng};
use storage::Lsn;
use wal::{
    FileLogStorage, LogConfig, LogDamage, LogManager, LogMode, LogRecord, LogStorage,
    MemLogStorage, OpenReport, TxnId, WalError,
};

fn open_with(path: &Path, accept_loss: bool) -> Result<(LogManager, OpenReport), WalError> {
    LogManager::open(
        Box::new(FileLogStorage::open(path).unwrap()),
        LogConfig {
            accept_loss,
            latching: true,
            ..LogConfig::default()
        },
    )
}

/// Writes `txns` committed transactions of three updates each; returns every record's LSN
/// (in log order) and the end.
fn write_log(path: &Path, txns: u64) -> (Vec<Lsn>, u64) {
    let (log, _) = open_with(path, false).unwrap();
    let mut lsns = Vec::new();
    for t in 1..=txns {
        let mut prev = Lsn::NONE;
        for i in 0..3u8 {
            prev = log.append_update(TxnId(t), prev, &[t as u8 ^ i | 1; 60]);
            lsns.push(prev);
        }
        lsns.push(log.commit(TxnId(t), prev).unwrap());
    }
    let end = log.end_lsn().0;
    (lsns, end)
}

fn flip_bits(path: &Path, at: u64, mask: u8) {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut byte = [0u8; 1];
    file.read_exact_at(&mut byte, at).unwrap();
    file.write_all_at(&[byte[0] ^ mask], at).unwrap();
}

fn damage_of(result: Result<(LogManager, OpenReport), WalError>) -> LogDamage {
    match result {
        Err(WalError::Damaged(damage)) => damage,
        Err(other) => panic!("expected mid-log damage, got {other}"),
        Ok((_, report)) => panic!("a damaged log opened: {report:?}"),
    }
}

#[test]
fn flipped_bits_with_commits_after_them_fail_the_open_by_lsn_and_cut_nothing() {
    let dir = tempfile::tempdir().unwrap();
    for (case, (offset, mask)) in [(12u64, 0x24u8), (0, 0x01), (8, 0x80), (4, 0x10)]
        .into_iter()
        .enumerate()
    {
        // Flip bits in the body, the length, the kind and the checksum of a record a quarter
        // into the log; every later transaction committed.
        let path = dir.path().join(format!("log-{case}"));
        let (lsns, end) = write_log(&path, 40);
        let k = lsns.len() / 4;
        flip_bits(&path, lsns[k].0 + offset, mask);
        let damage = damage_of(open_with(&path, false));
        assert_eq!(damage.lsn, lsns[k], "case {case}");
        assert_eq!(damage.bytes, end - lsns[k].0);
        assert_eq!(damage.records, (lsns.len() - k - 1) as u64, "case {case}");
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            end,
            "bytes were cut"
        );
        let message = WalError::Damaged(damage).to_string();
        assert!(message.contains(&lsns[k].to_string()), "{message}");
        assert!(message.contains("accept-log-loss"), "{message}");
        // Opening again says the same: nothing was changed.
        assert_eq!(damage_of(open_with(&path, false)), damage);
    }
}

#[test]
fn garbage_in_the_middle_of_the_log_is_damage() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(11);
    for round in 0..20 {
        let path = dir.path().join(format!("garbage-{round}"));
        let (lsns, end) = write_log(&path, 10);
        let k = rng.gen_range(1..lsns.len() - 8);
        let from = rng.gen_range(lsns[k].0..lsns[k + 1].0);
        // Garbage up to somewhere before the last four records.
        let to = rng.gen_range(from + 1..lsns[lsns.len() - 4].0);
        let original = std::fs::read(&path).unwrap();
        let mut garbage: Vec<u8> = (from..to).map(|_| rng.gen()).collect();
        garbage[0] = !original[from as usize];
        let file = OpenOptions::new().write(true).open(&path).unwrap();
        file.write_all_at(&garbage, from).unwrap();
        drop(file);
        let damage = damage_of(open_with(&path, false));
        assert_eq!(damage.lsn, lsns[k], "round {round}");
        let first_after = lsns.iter().position(|l| l.0 >= to).unwrap();
        assert!(damage.records >= (lsns.len() - first_after) as u64);
        assert_eq!(std::fs::read(&path).unwrap().len() as u64, end);
    }
}

#[test]
fn accepting_the_loss_cuts_the_log_at_the_damage_and_reports_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let (lsns, end) = write_log(&path, 40);
    let k = lsns.len() / 2;
    flip_bits(&path, lsns[k].0 + 20, 0x08);
    let (log, report) = open_with(&path, true).unwrap();
    let damage = report.damage.expect("the cut damage is reported");
    assert_eq!(damage.lsn, lsns[k]);
    assert_eq!(damage.bytes, end - lsns[k].0);
    assert_eq!(damage.records, (lsns.len() - k - 1) as u64);
    assert_eq!(report.end, lsns[k]);
    assert_eq!(report.records as usize, k);
    assert_eq!(report.cut_bytes, end - lsns[k].0);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), lsns[k].0);
    // The cut log takes appends and reopens clean, even without the flag.
    let lsn = log.commit(TxnId(99), Lsn::NONE).unwrap();
    assert_eq!(lsn, lsns[k]);
    log.check_invariants();
    drop(log);
    let (log, report) = open_with(&path, false).unwrap();
    assert_eq!((report.damage, report.cut_bytes), (None, 0));
    let last = log.iter_from(log.first_lsn()).last().unwrap().unwrap();
    assert_eq!(
        last.1,
        LogRecord::Commit {
            txn: TxnId(99),
            prev: Lsn::NONE
        }
    );
}

/// A power loss after a sync: the synced prefix is whole; in the unsynced tail some sectors
/// reached the disk, some read as zeros (a page written back before an earlier one), and some
/// hold an older version: what they held when the file ended at an earlier write's end (a
/// frame boundary), zeros after it. The file may end anywhere past the synced end. Such a log
/// always opens quietly, keeping every synced record (and so every acknowledged commit).
#[test]
fn unwritten_sectors_in_an_unsynced_tail_are_a_torn_tail() {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(5);
    for round in 0..200 {
        let storage = MemLogStorage::new();
        let (log, _) = LogManager::open(
            Box::new(storage.clone()),
            LogConfig {
                mode: LogMode::Durable,
                buffer_bytes: 700,
                accept_loss: false,
                latching: true,
                gather_commits: true,
                runs: true,
                run_bytes: wal::RUN_BYTES,
                sync_write_back: true,
            },
        )
        .unwrap();
        let mut prev = Lsn::NONE;
        let mut boundaries = Vec::new();
        let synced_txns = rng.gen_range(0..20u64);
        for t in 1..=synced_txns + 30 {
            for _ in 0..rng.gen_range(1..4) {
                let len = rng.gen_range(1..300);
                let payload: Vec<u8> = (0..len).map(|_| rng.gen_range(1..=255)).collect();
                prev = log.append_update(TxnId(t), prev, &payload);
                boundaries.push(prev.0);
            }
            if t <= synced_txns {
                prev = log.commit(TxnId(t), prev).unwrap();
            } else {
                // Unsynced: written out only as the small buffer fills.
                prev = log.append(&LogRecord::Commit {
                    txn: TxnId(t),
                    prev,
                });
            }
        }
        let synced = log.durable_lsn().0;
        let mut image = storage.bytes();
        std::mem::forget(log); // a crash: nothing more is written
        let written = image.len() as u64;
        assert!(
            written > synced + 2048,
            "round {round}: too little unsynced"
        );
        let cut = rng.gen_range(synced..=written);
        image.truncate(cut as usize);
        // Zero some sectors of the tail (the one holding the synced end only past it), or the
        // end of one past a frame boundary (an older version of it).
        boundaries.retain(|b| *b >= synced && *b < cut);
        for _ in 0..rng.gen_range(1..4) {
            let from = if rng.gen_bool(0.5) || boundaries.is_empty() {
                let sector = rng.gen_range(synced / 512..=cut.saturating_sub(1) / 512);
                (sector * 512).max(synced)
            } else {
                boundaries[rng.gen_range(0..boundaries.len())]
            };
            let to = ((from / 512 + 1) * 512).min(cut);
            if from < to {
                image[from as usize..to as usize].fill(0);
            }
        }
        let crashed = MemLogStorage::new();
        crashed.set_bytes(image);
        let (log, report) = match LogManager::open(Box::new(crashed), LogConfig::default()) {
            Ok(opened) => opened,
            Err(e) => panic!("round {round}: a power-loss image was refused: {e}"),
        };
        assert_eq!(report.damage, None);
        assert!(report.end.0 >= synced, "round {round}: synced records lost");
        log.check_invariants();
    }
}

#[test]
fn zeros_before_the_master_checkpoint_are_damage_not_a_power_loss() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let (log, _) = open_with(&path, false).unwrap();
    let mut lsns = Vec::new();
    let mut prev = Lsn::NONE;
    for i in 0..40u8 {
        prev = log.append_update(TxnId(1), prev, &[i | 1; 100]);
        lsns.push(prev);
    }
    log.commit(TxnId(1), prev).unwrap();
    let begin = log.append(&LogRecord::CheckpointBegin);
    log.append(&LogRecord::CheckpointEnd {
        begin,
        active: vec![],
        dirty: vec![],
        meta: vec![],
    });
    // The master names the checkpoint only once the log is synced past it.
    log.set_checkpoint(begin).unwrap();
    drop(log);
    // A whole zero sector well before the checkpoint: synced bytes no crash can lose.
    let sector = lsns[5].0.div_ceil(512) * 512;
    assert!(sector + 512 < begin.0);
    let file = OpenOptions::new().write(true).open(&path).unwrap();
    file.write_all_at(&[0u8; 512], sector).unwrap();
    drop(file);
    let damage = damage_of(open_with(&path, false));
    assert!(
        damage.lsn.0 <= sector && damage.lsn.0 > lsns[4].0,
        "{damage}"
    );
    assert!(
        damage.records >= 2,
        "the checkpoint's records follow: {damage}"
    );
}

/// A storage whose writes fail with a full disk once `full` is set.
struct FullDisk {
    inner: MemLogStorage,
    full: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl LogStorage for FullDisk {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        self.inner.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, bytes: &[u8]) -> std::io::Result<()> {
        if self.full.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
        }
        self.inner.write_at(offset, bytes)
    }
    fn sync(&self) -> std::io::Result<()> {
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

#[test]
fn a_full_disk_is_named_by_every_later_failure() {
    let full = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let storage = FullDisk {
        inner: MemLogStorage::new(),
        full: full.clone(),
    };
    let config = LogConfig {
        mode: LogMode::NoForce,
        buffer_bytes: 256,
        accept_loss: false,
        latching: true,
        gather_commits: true,
        runs: true,
        run_bytes: wal::RUN_BYTES,
        sync_write_back: true,
    };
    let (log, _) = LogManager::open(Box::new(storage), config).unwrap();
    full.store(true, std::sync::atomic::Ordering::Relaxed);
    // A load: the appender that fills the buffer writes it out, meets the full disk, and
    // cannot report it (appends return LSNs); the next flush is the first to hear of it.
    for i in 0..10u8 {
        log.append_update(TxnId(1), Lsn::NONE, &[i; 100]);
    }
    let err = log.flush_to(log.end_lsn()).unwrap_err();
    assert!(matches!(err, WalError::Failed { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("writing the log"), "{message}");
    assert!(message.contains("No space left on device"), "{message}");
    // The buffer pool's view of it (the write-ahead rule) keeps the cause too.
    let storage_err: storage::StorageError = log.flush_to(log.end_lsn()).unwrap_err().into();
    let chain = format!(
        "{storage_err}: {}",
        std::error::Error::source(&storage_err).unwrap()
    );
    assert!(chain.contains("No space left on device"), "{chain}");
}

/// A log discarded behind its checkpoint, damaged between its start and the checkpoint: the
/// loss, once accepted, takes the checkpoint with it; the master record stops naming it, so
/// the cut log reopens (and checkpoints again) without the flag.
#[test]
fn an_accepted_loss_before_the_checkpoint_of_a_discarded_log_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let (log, _) = open_with(&path, false).unwrap();
    let mut lsns = Vec::new();
    let mut prev = Lsn::NONE;
    for i in 0..60u8 {
        prev = log.append_update(TxnId(1), prev, &[i | 1; 200]);
        lsns.push(prev);
    }
    let begin = log.append(&LogRecord::CheckpointBegin);
    log.append(&LogRecord::CheckpointEnd {
        begin,
        active: vec![],
        dirty: vec![],
        meta: vec![],
    });
    log.set_checkpoint(begin).unwrap();
    let start = lsns[20];
    assert_eq!(log.discard_before(start).unwrap(), start);
    log.commit(TxnId(1), prev).unwrap();
    drop(log);
    flip_bits(&path, lsns[40].0 + 30, 0x04);

    assert_eq!(damage_of(open_with(&path, false)).lsn, lsns[40]);
    let (log, report) = open_with(&path, true).unwrap();
    assert_eq!(report.damage.map(|d| d.lsn), Some(lsns[40]));
    assert!(report.damage.unwrap().records >= 3, "{report:?}");
    assert!(report.master_ignored);
    assert_eq!((report.start, report.end), (start, lsns[40]));
    assert_eq!(log.last_checkpoint(), None);
    log.check_invariants();
    drop(log);

    let (log, report) = open_with(&path, false).unwrap();
    assert_eq!(
        (report.start, report.end, report.damage),
        (start, lsns[40], None)
    );
    assert_eq!(log.iter_from(start).count(), 20);
    let begin = log.append(&LogRecord::CheckpointBegin);
    log.complete_checkpoint(begin, begin).unwrap();
    log.check_invariants();
    drop(log);
    let (_, report) = open_with(&path, false).unwrap();
    assert_eq!((report.start, report.checkpoint), (begin, Some(begin)));
}

/// A storage that counts the bytes read from it.
struct CountingReads {
    inner: MemLogStorage,
    read: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl LogStorage for CountingReads {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read_at(offset, buf)?;
        self.read
            .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(n)
    }
    fn write_at(&self, offset: u64, bytes: &[u8]) -> std::io::Result<()> {
        self.inner.write_at(offset, bytes)
    }
    fn sync(&self) -> std::io::Result<()> {
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

/// Looking past a bad frame reads the bytes after it about once, even when they are 8 MiB of
/// random garbage, whose random lengths would each send a naive search reading megabytes.
#[test]
fn looking_past_a_long_garbage_tail_reads_it_about_once() {
    let inner = MemLogStorage::new();
    let (log, _) = LogManager::open(Box::new(inner.clone()), LogConfig::default()).unwrap();
    log.commit(TxnId(1), Lsn::NONE).unwrap();
    drop(log);
    let mut bytes = inner.bytes();
    let intact_end = bytes.len() as u64;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
    bytes.extend((0..8 << 20).map(|_| rng.gen::<u8>()));
    let len = bytes.len() as u64;
    inner.set_bytes(bytes);
    let read = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let storage = CountingReads {
        inner,
        read: read.clone(),
    };
    let (_, report) = LogManager::open(Box::new(storage), LogConfig::default()).unwrap();
    assert_eq!((report.end.0, report.damage), (intact_end, None));
    let read = read.load(std::sync::atomic::Ordering::Relaxed);
    assert!(read <= 3 * len, "read {read} bytes of a {len}-byte log");
}
