//! Discarding the log behind a checkpoint: the master record names the new start before any
//! byte is freed; reopening scans from the start (never through the hole a file punch leaves);
//! reads below it are refused by name; a crash between the master write and the punch leaves a
//! log that opens; an old-format master or log is refused, not misread.

use std::ops::Range;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

use storage::Lsn;
use wal::storage::FileLogOptions;
use wal::{
    FileLogStorage, LogConfig, LogManager, LogMode, LogRecord, LogStorage, MemLogStorage,
    OpenReport, TxnId, WalError,
};

const PAYLOAD_BYTES: usize = 4000;

fn open(storage: impl LogStorage + 'static) -> (LogManager, OpenReport) {
    LogManager::open(Box::new(storage), LogConfig::default()).unwrap()
}

/// Without preallocation: these tests compare the file's length with the log's end, which
/// preallocated zeros would pass (`log_file.rs` discards with preallocation).
fn open_file(path: &Path) -> (LogManager, OpenReport) {
    let options = FileLogOptions {
        prealloc_bytes: 0,
        ..FileLogOptions::default()
    };
    open(FileLogStorage::open_with(path, options).unwrap())
}

fn payload(i: usize) -> Vec<u8> {
    vec![(i % 251) as u8; PAYLOAD_BYTES]
}

/// Appends `n` updates (about 4 KB each, committed every 16), a complete checkpoint, and `n`
/// more updates; returns every record's LSN with what it holds and the checkpoint's begin.
fn fill(log: &LogManager, n: usize) -> (Vec<(Lsn, LogRecord)>, Lsn) {
    fill_around(log, n, n)
}

/// [`fill`] with `before` updates before the checkpoint and `after` after it.
fn fill_around(log: &LogManager, before: usize, after: usize) -> (Vec<(Lsn, LogRecord)>, Lsn) {
    let mut records = Vec::new();
    let mut prev = Lsn::NONE;
    let mut begin = Lsn::NONE;
    for i in 0..before + after {
        if i == before {
            begin = log.append(&LogRecord::CheckpointBegin);
            records.push((begin, LogRecord::CheckpointBegin));
            let end = LogRecord::CheckpointEnd {
                begin,
                active: vec![],
                dirty: vec![],
                meta: vec![],
            };
            records.push((log.append(&end), end));
            log.set_checkpoint(begin).unwrap();
        }
        let record = LogRecord::Update {
            txn: TxnId(1 + i as u64 / 16),
            prev,
            payload: payload(i),
        };
        prev = log.append(&record);
        records.push((prev, record));
        if i % 16 == 15 {
            let lsn = log.commit(TxnId(1 + i as u64 / 16), prev).unwrap();
            records.push((
                lsn,
                LogRecord::Commit {
                    txn: TxnId(1 + i as u64 / 16),
                    prev,
                },
            ));
            prev = Lsn::NONE;
        }
    }
    log.flush_to(log.end_lsn()).unwrap();
    (records, begin)
}

/// Every record at or past `start` reads back (one by one and in a scan from the start); every
/// one below it is refused as discarded, by `read` and by `iter_from`.
fn check_reads(log: &LogManager, records: &[(Lsn, LogRecord)], start: Lsn) {
    assert_eq!(log.first_lsn(), start);
    for (lsn, record) in records {
        if *lsn >= start {
            assert_eq!(&log.read(*lsn).unwrap(), record, "record at {lsn}");
        } else {
            let err = log.read(*lsn).unwrap_err();
            assert!(
                matches!(err, WalError::Discarded { lsn: l, start: s } if l == *lsn && s == start),
                "read at {lsn}: {err:?}"
            );
            let first = log.iter_from(*lsn).next().unwrap();
            assert!(
                matches!(first, Err(WalError::Discarded { .. })),
                "{first:?}"
            );
        }
    }
    let kept: Vec<_> = records
        .iter()
        .filter(|(l, _)| *l >= start)
        .cloned()
        .collect();
    let scanned: Vec<_> = log.iter_from(start).collect::<Result<_, _>>().unwrap();
    assert_eq!(scanned, kept);
    log.check_invariants();
}

/// The LSN of the record halfway to the checkpoint's begin: the oldest one "still needed".
/// A file log in a new temporary directory (kept while the first value lives), filled by
/// [`fill`] with `n` records each side of a checkpoint: (directory, log path, log, records,
/// checkpoint begin).
fn filled_file_log(
    n: usize,
) -> (
    tempfile::TempDir,
    std::path::PathBuf,
    LogManager,
    Vec<(Lsn, LogRecord)>,
    Lsn,
) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let (log, _) = open_file(&path);
    let (records, begin) = fill(&log, n);
    (dir, path, log, records, begin)
}

fn halfway(records: &[(Lsn, LogRecord)], begin: Lsn) -> Lsn {
    let below = records.iter().filter(|(l, _)| *l < begin).count();
    records[below / 2].0
}

#[test]
fn a_memory_log_discards_reopens_from_its_start_and_frees_the_memory() {
    let storage = MemLogStorage::new();
    let (log, _) = open(storage.clone());
    let (records, begin) = fill_around(&log, 2000, 200);
    let held_before = log.held_bytes().unwrap().unwrap();
    assert!(held_before >= 8_000_000, "{held_before}");
    let start = begin;
    assert_eq!(log.discard_before(start).unwrap(), start);
    let stats = log.stats();
    assert_eq!(stats.start, start);
    assert_eq!(stats.discarded_bytes, start.0 - 16);
    assert_eq!(stats.live_bytes, log.end_lsn().0 - start.0);
    check_reads(&log, &records, start);
    // What is held follows the live log (at most twice it), not the log's peak.
    let held_after = log.held_bytes().unwrap().unwrap();
    let live = log.stats().live_bytes;
    assert!(
        held_after <= 16 + 2 * live && held_after < held_before / 4,
        "held {held_before} → {held_after} bytes for {live} live ones"
    );
    // A smaller start later is a no-op; the start only grows.
    assert_eq!(log.discard_before(records[3].0).unwrap(), start);
    // The whole image reads as a punched file would: the header, zeros, the live log.
    let image = storage.bytes();
    assert_eq!(image.len() as u64, log.end_lsn().0);
    assert_eq!(&image[..8], b"GLASSWAL");
    assert!(image[16..start.0 as usize].iter().all(|&b| b == 0));
    drop(log);

    let (log, report) = open(storage.clone());
    assert_eq!(report.start, start);
    assert_eq!(report.checkpoint, Some(begin));
    assert_eq!(report.cut_bytes, 0);
    let live = records.iter().filter(|(l, _)| *l >= start).count() as u64;
    assert_eq!(report.records, live);
    check_reads(&log, &records, start);
    // Appends continue past the discarded prefix, and survive another reopen.
    let more = log.commit(TxnId(9999), Lsn::NONE).unwrap();
    drop(log);
    let (log, report) = open(storage);
    assert_eq!(report.records, live + 1);
    assert!(log.read(more).is_ok());
}

/// Whether the file system under `dir` punches holes (tmpfs and ext4 do; some do not).
fn punches_holes(dir: &Path) -> bool {
    use std::os::fd::AsRawFd;
    let path = dir.join("probe");
    let file = std::fs::File::create(&path).unwrap();
    file.write_all_at(&vec![1u8; 1 << 20], 0).unwrap();
    file.sync_all().unwrap();
    // SAFETY: a plain system call on a descriptor `file` owns.
    let rc = unsafe {
        libc::fallocate(
            file.as_raw_fd(),
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            0,
            1 << 20,
        )
    };
    rc == 0
}

#[test]
fn a_file_log_punches_a_hole_and_reopens_from_its_start_not_through_the_hole() {
    let (dir, path, log, records, begin) = filled_file_log(1000);
    let len = std::fs::metadata(&path).unwrap().len();
    let blocks_before = std::fs::metadata(&path).unwrap().blocks();
    let start = begin;
    assert!(start.0 > 3 << 20, "discard several MiB: {start}");
    assert_eq!(log.discard_before(start).unwrap(), start);
    check_reads(&log, &records, start);
    drop(log);

    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(
        meta.len(),
        len,
        "offsets stay valid: the size does not change"
    );
    if punches_holes(dir.path()) {
        let freed = (blocks_before - meta.blocks()) * 512;
        // Block accounting is the file system's (extent metadata, its block size): allow
        // 64 KiB of slack on the ~4 MiB discarded.
        assert!(
            freed + (64 << 10) >= start.0 - 16,
            "only {freed} of {} discarded bytes freed",
            start.0 - 16
        );
        // The hole reads as zeros: exactly what a scan from the header would take for a torn
        // tail (and cut the whole log there).
        let mut hole = vec![0xFFu8; 4096];
        std::fs::File::open(&path)
            .unwrap()
            .read_exact_at(&mut hole, 8192)
            .unwrap();
        assert!(hole.iter().all(|&b| b == 0));
    } else {
        eprintln!("this file system does not punch holes: checked the logical discard only");
    }

    let (log, report) = open_file(&path);
    assert_eq!(report.start, start);
    assert_eq!(report.checkpoint, Some(begin));
    assert_eq!(report.cut_bytes, 0, "{:?}", report.cut_reason);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), len);
    check_reads(&log, &records, start);
}

/// Delegates to a memory log but never frees anything: the state a crash leaves between the
/// master record's write and the discard of the bytes.
struct NeverFrees(MemLogStorage);

impl LogStorage for NeverFrees {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, bytes: &[u8]) -> std::io::Result<()> {
        self.0.write_at(offset, bytes)
    }
    fn sync(&self) -> std::io::Result<()> {
        self.0.sync()
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
    fn discard(&self, _range: Range<u64>) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_crash_between_the_master_write_and_the_free_leaves_a_log_that_opens() {
    // Memory: the storage never frees; a crash image then reopens from the new start.
    let storage = MemLogStorage::new();
    let (log, _) = open(NeverFrees(storage.clone()));
    let (records, begin) = fill(&log, 100);
    let start = halfway(&records, begin);
    log.discard_before(start).unwrap();
    std::mem::forget(log);
    let (log, report) = open(storage.crash_image(0));
    assert_eq!(report.start, start);
    assert_eq!(report.cut_bytes, 0);
    check_reads(&log, &records, start);

    // File: the punched bytes come back (the punch never reached the disk).
    let (_dir, path, log, records, begin) = filled_file_log(300);
    let before = std::fs::read(&path).unwrap();
    let start = halfway(&records, begin);
    log.discard_before(start).unwrap();
    drop(log);
    std::fs::write(&path, &before).unwrap();
    let (log, report) = open_file(&path);
    assert_eq!(report.start, start);
    assert_eq!(report.cut_bytes, 0);
    check_reads(&log, &records, start);
}

#[test]
fn a_discard_needs_a_checkpoint_at_or_past_it_and_a_record_boundary() {
    let storage = MemLogStorage::new();
    let (log, _) = open(storage.clone());
    let a = log.append_update(TxnId(1), Lsn::NONE, b"a");
    let b = log.commit(TxnId(1), a).unwrap();
    assert!(matches!(
        log.discard_before(b),
        Err(WalError::DiscardPastCheckpoint {
            checkpoint: None,
            ..
        })
    ));
    let begin = log.append(&LogRecord::CheckpointBegin);
    let after = log.commit(TxnId(2), Lsn::NONE).unwrap();
    log.set_checkpoint(begin).unwrap();
    assert!(matches!(
        log.discard_before(after),
        Err(WalError::DiscardPastCheckpoint { checkpoint: Some(c), .. }) if c == begin
    ));
    // Inside a record: refused before the master record changes.
    assert!(log.discard_before(Lsn(b.0 + 3)).is_err());
    assert_eq!(log.first_lsn(), Lsn(16));
    // Exactly at the checkpoint's begin is allowed.
    assert_eq!(log.discard_before(begin).unwrap(), begin);
    assert!(matches!(log.read(b), Err(WalError::Discarded { .. })));
    // A checkpoint below the start is refused.
    assert!(log.set_checkpoint(a).is_err());
    drop(log);
    let (log, report) = open(storage);
    assert_eq!((report.start, report.checkpoint), (begin, Some(begin)));
    assert_eq!(report.records, 2);
    log.check_invariants();
}

#[test]
fn a_log_that_is_never_forced_discards_behind_its_checkpoints_and_an_lsn_only_one_does_not() {
    for mode in [LogMode::NoForce, LogMode::LsnOnly] {
        let storage = MemLogStorage::new();
        let (log, _) = LogManager::open(
            Box::new(storage.clone()),
            LogConfig {
                mode,
                buffer_bytes: 1 << 20,
                accept_loss: false,
                latching: true,
                gather_commits: true,
                runs: true,
                run_bytes: wal::RUN_BYTES,
                sync_write_back: true,
            },
        )
        .unwrap();
        let a = log.append_update(TxnId(1), Lsn::NONE, b"a");
        let begin = log.append(&LogRecord::CheckpointBegin);
        log.set_checkpoint(begin).unwrap();
        if mode == LogMode::NoForce {
            // The checkpoint synced the log and wrote the master: the log may go before it.
            assert!(storage.read_master().unwrap().is_some());
            assert_eq!(log.discard_before(begin).unwrap(), begin);
            assert!(matches!(log.read(a), Err(WalError::Discarded { .. })));
            drop(log);
            let (log, report) = open(storage.crash_image(0));
            assert_eq!((report.start, report.checkpoint), (begin, Some(begin)));
            log.check_invariants();
        } else {
            assert_eq!(log.discard_before(begin).unwrap(), Lsn(16), "{mode:?}");
            assert_eq!(storage.read_master().unwrap(), None);
        }
    }
}

#[test]
fn a_scan_that_cannot_reach_the_checkpoint_past_a_discard_fails_and_cuts_nothing() {
    let (_dir, path, log, records, begin) = filled_file_log(100);
    let start = halfway(&records, begin);
    log.discard_before(start).unwrap();
    drop(log);
    // Damage the live log between the start and the checkpoint: a zeroed record there looks
    // like a torn tail, but cutting there would drop the checkpoint.
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.write_all_at(&[0u8; 64], start.0 + 100).unwrap();
    drop(file);
    let len = std::fs::metadata(&path).unwrap().len();
    let err = LogManager::open(
        Box::new(FileLogStorage::open(&path).unwrap()),
        LogConfig::default(),
    )
    .err()
    .expect("a log that cannot reach its checkpoint opened");
    // The records after the zeroed one, the checkpoint's among them, name it as damage.
    assert!(
        matches!(err, WalError::Damaged(d) if d.lsn.0 <= start.0 + 100 && d.records > 0),
        "{err:?}"
    );
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        len,
        "bytes were cut"
    );

    // A torn tail past the checkpoint is still cut as usual.
    let (_dir, path, log, records, begin) = filled_file_log(100);
    let start = halfway(&records, begin);
    log.discard_before(start).unwrap();
    let end = log.end_lsn().0;
    drop(log);
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.write_all_at(&[0xAB; 37], end).unwrap();
    drop(file);
    let (log, report) = open_file(&path);
    assert_eq!(
        (report.start, report.end, report.cut_bytes),
        (start, Lsn(end), 37)
    );
    check_reads(&log, &records, start);
}

/// A version-2 master record: 20 bytes, no start, CRC-32C of bytes 0..16 at 16.
fn version_2_master(checkpoint: Lsn) -> Vec<u8> {
    let mut bytes = b"GLMR".to_vec();
    bytes.extend_from_slice(&2u32.to_le_bytes());
    bytes.extend_from_slice(&checkpoint.0.to_le_bytes());
    let crc = wal::checksum::crc32c(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    bytes
}

#[test]
fn a_version_2_master_or_log_is_refused_not_misread() {
    let storage = MemLogStorage::new();
    let (log, _) = open(storage.clone());
    let begin = log.append(&LogRecord::CheckpointBegin);
    log.set_checkpoint(begin).unwrap();
    drop(log);
    storage.write_master(&version_2_master(begin)).unwrap();
    let result = LogManager::open(Box::new(storage.clone()), LogConfig::default());
    assert!(
        matches!(
            result,
            Err(WalError::UnsupportedVersion {
                what: "master record",
                found: 2,
                supported: wal::log::MASTER_VERSION
            })
        ),
        "{:?}",
        result.err()
    );

    // A version-2 log header (which a version-2 build wrote: it never discarded) is refused
    // too, and left as it was.
    let mut image = storage.bytes();
    image[8..12].copy_from_slice(&2u32.to_le_bytes());
    let crc = wal::checksum::crc32c(&image[..12]);
    image[12..16].copy_from_slice(&crc.to_le_bytes());
    let old = MemLogStorage::new();
    old.set_bytes(image.clone());
    let result = LogManager::open(Box::new(old.clone()), LogConfig::default());
    assert!(
        matches!(
            result,
            Err(WalError::UnsupportedVersion {
                what: "log",
                found: 2,
                ..
            })
        ),
        "{:?}",
        result.err()
    );
    assert_eq!(old.bytes(), image);
}

/// A checkpoint's completion records its begin and the new start in one master write: after
/// a reopen both are there, and the records below the start are gone.
#[test]
fn completing_a_checkpoint_sets_it_and_discards_behind_it_at_once() {
    let (_dir, path, log, mut records, begin) = filled_file_log(100);
    let start = halfway(&records, begin);
    let next = log.append(&LogRecord::CheckpointBegin);
    records.push((next, LogRecord::CheckpointBegin));
    assert_eq!(log.complete_checkpoint(next, start).unwrap(), start);
    assert_eq!(log.last_checkpoint(), Some(next));
    check_reads(&log, &records, start);
    // A start past the checkpoint is refused, and changes nothing.
    let later = log.append(&LogRecord::CheckpointBegin);
    records.push((later, LogRecord::CheckpointBegin));
    assert!(matches!(
        log.discard_before(later),
        Err(WalError::DiscardPastCheckpoint { .. })
    ));
    drop(log);
    let (log, report) = open_file(&path);
    assert_eq!((report.start, report.checkpoint), (start, Some(next)));
    check_reads(&log, &records, start);
}

/// A version-3 master record (written by builds that kept the log in one file) is read as it
/// is, and the next checkpoint writes version 4, which such builds refuse: a log that may go on
/// in segment files is never read by a build that would see only its first file.
#[test]
fn a_version_3_master_is_read_and_the_next_checkpoint_writes_version_4() {
    let storage = MemLogStorage::new();
    let (log, _) = open(storage.clone());
    let begin = log.append(&LogRecord::CheckpointBegin);
    log.set_checkpoint(begin).unwrap();
    drop(log);
    let mut master = storage.read_master().unwrap().unwrap();
    assert_eq!(master[4..8], wal::log::MASTER_VERSION.to_le_bytes());
    master[4..8].copy_from_slice(&3u32.to_le_bytes());
    let crc = wal::checksum::crc32c(&master[..24]);
    master[24..28].copy_from_slice(&crc.to_le_bytes());
    storage.write_master(&master).unwrap();

    let (log, report) = open(storage.clone());
    assert_eq!(
        report.checkpoint,
        Some(begin),
        "the version-3 master was read"
    );
    let again = log.append(&LogRecord::CheckpointBegin);
    log.set_checkpoint(again).unwrap();
    let written = storage.read_master().unwrap().unwrap();
    assert_eq!(written[4..8], 4u32.to_le_bytes());
}
