//! The log file's options under the log manager: every sync method, with and without
//! preallocation, round-trips a log through `LogManager::open`; the zeros a crash leaves past
//! a preallocated log's end are cut at the next open, which loses no record, and the log goes
//! on; a copy of the file taken while the log is live (a crash image) holds every synced
//! record; discarding behind a checkpoint and cutting a torn tail keep working with
//! preallocation; a log in many small segments round-trips, copies and discards whole
//! segments, and one whose middle segment is missing is refused.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use storage::Lsn;
use wal::storage::{FileLogOptions, LogSync, DEFAULT_PREALLOC_BYTES};
use wal::{FileLogStorage, LogConfig, LogManager, LogRecord, OpenReport, TxnId};

/// A chunk small enough that the logs below cross several.
const SMALL_CHUNK: u64 = 64 << 10;

/// Every sync method with preallocation off, in small chunks and at the default.
fn every_option() -> Vec<FileLogOptions> {
    let mut all = Vec::new();
    for sync in LogSync::ALL {
        for prealloc_bytes in [0, SMALL_CHUNK, DEFAULT_PREALLOC_BYTES] {
            all.push(FileLogOptions {
                sync,
                prealloc_bytes,
                ..FileLogOptions::default()
            });
        }
    }
    all
}

fn open(path: &Path, options: FileLogOptions) -> (LogManager, OpenReport) {
    let storage = FileLogStorage::open_with(path, options).unwrap();
    LogManager::open(Box::new(storage), LogConfig::default()).unwrap()
}

/// Appends `n` updates of varied lengths (1 byte to several blocks, so writes start and end
/// at every offset in a block), committing every fourth: each commit forces the log. Returns
/// every record with its LSN.
fn write_records(log: &LogManager, n: u64, salt: u64) -> Vec<(Lsn, LogRecord)> {
    let mut records = Vec::new();
    let mut prev = Lsn::NONE;
    for i in 0..n {
        let txn = TxnId(salt * 1_000_000 + 1 + i / 4);
        let len = ((i * 7919 + salt * 131) % 9000 + 1) as usize;
        let record = LogRecord::Update {
            txn,
            prev,
            payload: vec![(i % 251) as u8 + 1; len],
        };
        prev = log.append(&record);
        records.push((prev, record));
        if i % 4 == 3 {
            let lsn = log.commit(txn, prev).unwrap();
            records.push((lsn, LogRecord::Commit { txn, prev }));
            prev = Lsn::NONE;
        }
    }
    records
}

/// Every record reads back, one by one and in a scan from the first.
fn check_records(log: &LogManager, records: &[(Lsn, LogRecord)]) {
    for (lsn, record) in records {
        assert_eq!(&log.read(*lsn).unwrap(), record, "record at {lsn}");
    }
    let scanned: Vec<_> = log
        .iter_from(log.first_lsn())
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(scanned, records);
    log.check_invariants();
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

#[test]
fn every_sync_method_with_and_without_preallocation_round_trips_a_log() {
    for options in every_option() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.log");
        let (log, report) = open(&path, options);
        assert!(report.created);
        let mut records = write_records(&log, 120, 1);
        let end = log.end_lsn();
        assert_eq!(
            log.durable_lsn(),
            end,
            "{options:?}: the last commit forced it all"
        );
        if options.prealloc_bytes > 0 {
            let len = file_len(&path);
            assert!(
                len > end.0 && len.is_multiple_of(options.prealloc_bytes),
                "{options:?}: {len} bytes for a log ending at {end}"
            );
        }
        drop(log);
        // A clean close leaves the file as long as its records.
        assert_eq!(file_len(&path), end.0, "{options:?}");

        let (log, report) = open(&path, options);
        assert_eq!(
            (report.records, report.end, report.cut_bytes),
            (records.len() as u64, end, 0),
            "{options:?}"
        );
        check_records(&log, &records);
        // The log goes on, and that survives another reopen, under another method too.
        records.extend(write_records(&log, 40, 2));
        let end = log.end_lsn();
        drop(log);
        let other = FileLogOptions {
            sync: LogSync::ALL[(LogSync::ALL
                .iter()
                .position(|s| *s == options.sync)
                .unwrap()
                + 1)
                % LogSync::ALL.len()],
            ..options
        };
        let (log, report) = open(&path, other);
        assert_eq!((report.end, report.cut_bytes), (end, 0), "{other:?}");
        check_records(&log, &records);
    }
}

#[test]
fn a_crash_leaves_zeros_that_the_next_open_cuts_and_the_log_goes_on() {
    for sync in LogSync::ALL {
        for prealloc_bytes in [SMALL_CHUNK, DEFAULT_PREALLOC_BYTES] {
            let options = FileLogOptions {
                sync,
                prealloc_bytes,
                ..FileLogOptions::default()
            };
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("wal.log");
            let (log, _) = open(&path, options);
            let mut records = write_records(&log, 80, 1);
            let end = log.end_lsn();
            // A crash: nothing runs at the end, so the zeros past the log stay.
            std::mem::forget(log);
            let len = file_len(&path);
            assert!(len > end.0, "{options:?}: {len}");

            let opened = std::time::Instant::now();
            let (log, report) = open(&path, options);
            eprintln!(
                "{options:?}: cut {} bytes of zeros in {:?}",
                report.cut_bytes,
                opened.elapsed()
            );
            assert_eq!(report.records, records.len() as u64, "{options:?}");
            assert_eq!(report.end, end);
            assert_eq!(report.cut_bytes, len - end.0);
            assert!(report.cut_reason.is_some());
            assert_eq!(file_len(&path), end.0, "the open truncated the zeros");
            check_records(&log, &records);
            // The next writes preallocate again and land after the cut.
            records.extend(write_records(&log, 80, 2));
            let end = log.end_lsn();
            assert!(file_len(&path) > end.0);
            std::mem::forget(log);

            let (log, report) = open(&path, options);
            assert_eq!((report.end, report.records), (end, records.len() as u64));
            check_records(&log, &records);
        }
    }
}

#[test]
fn a_copy_taken_while_the_log_is_live_holds_every_synced_record() {
    for options in every_option() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.log");
        let (log, _) = open(&path, options);
        let synced = write_records(&log, 100, 1);
        assert_eq!(log.durable_lsn(), log.end_lsn());
        // Appended, not forced: a crash may lose these.
        log.append_update(TxnId(77), Lsn::NONE, b"not forced");
        let image = dir.path().join("image.log");
        std::fs::copy(&path, &image).unwrap();
        if options.prealloc_bytes > 0 {
            assert!(file_len(&image) > log.durable_lsn().0, "{options:?}");
        }

        let (copy, report) = open(&image, options);
        assert!(report.records >= synced.len() as u64, "{options:?}");
        for (lsn, record) in &synced {
            assert_eq!(&copy.read(*lsn).unwrap(), record, "{options:?}: {lsn}");
        }
        copy.check_invariants();
        // The live log is untouched by the copy's open and goes on.
        drop(copy);
        let more = write_records(&log, 8, 2);
        drop(log);
        let (log, _) = open(&path, options);
        for (lsn, record) in synced.iter().chain(&more) {
            assert_eq!(&log.read(*lsn).unwrap(), record);
        }
    }
}

/// A power cut (a file system in memory that loses what was not synced, and any name its
/// directory was not synced for) keeps every forced record under every sync method, with and
/// without preallocation, in one file and in segments created as the log grows. Skipped,
/// saying so, where FUSE cannot be mounted.
#[test]
fn a_power_cut_keeps_every_forced_record_under_every_sync_method() {
    use rand::SeedableRng;
    let at = tempfile::tempdir().unwrap();
    let Some(mounted) = powercut::Mounted::mount_or_skip(at.path()) else {
        return;
    };
    let mut round = 0u64;
    for sync in LogSync::ALL {
        for prealloc_bytes in [0, SMALL_CHUNK] {
            for segment_bytes in [64 << 10, FileLogOptions::default().segment_bytes] {
                round += 1;
                let options = FileLogOptions {
                    sync,
                    prealloc_bytes,
                    segment_bytes,
                };
                let dir = mounted.path().join(format!("log-{round}"));
                storage::file::create_dir_all_durably(&dir).unwrap();
                let path = dir.join("wal.log");
                let (log, _) = open(&path, options);
                let forced = write_records(&log, 120, round);
                assert_eq!(log.durable_lsn(), log.end_lsn(), "{options:?}");
                log.append_update(TxnId(77), Lsn::NONE, b"not forced");
                // The power goes with the log still open: everything unsynced is lost.
                let cut = mounted
                    .cut(0.0, &mut rand::rngs::SmallRng::seed_from_u64(round))
                    .unwrap();
                assert_eq!(cut.files_lost, 0, "{options:?}: {cut:?}");
                // What survived, copied off the mount, opens with every forced record.
                let image = tempfile::tempdir().unwrap();
                for entry in std::fs::read_dir(&dir).unwrap() {
                    let entry = entry.unwrap();
                    std::fs::copy(entry.path(), image.path().join(entry.file_name())).unwrap();
                }
                drop(log);
                let (copy, _) = open(&image.path().join("wal.log"), options);
                for (lsn, record) in &forced {
                    assert_eq!(&copy.read(*lsn).unwrap(), record, "{options:?}: {lsn}");
                }
                copy.check_invariants();
            }
        }
    }
}

/// A log whose commits are not forced (`NoForce`, a run without `--durable`) still syncs what
/// `flush_to` asks for, as the buffer pool asks before it writes a page back, so that a power
/// cut keeps every record a page on disk may need; with `sync_write_back` off (the ladder's
/// `disk-log=off`, a log never forced) the same cut loses them. Skipped, saying so, where FUSE
/// cannot be mounted.
#[test]
fn a_log_whose_commits_are_not_forced_syncs_what_a_page_write_back_flushes_to() {
    use rand::SeedableRng;
    let at = tempfile::tempdir().unwrap();
    let Some(mounted) = powercut::Mounted::mount_or_skip(at.path()) else {
        return;
    };
    for (round, sync_write_back) in [true, false].into_iter().enumerate() {
        let config = LogConfig {
            mode: wal::LogMode::NoForce,
            sync_write_back,
            ..LogConfig::default()
        };
        let dir = mounted.path().join(format!("log-{round}"));
        storage::file::create_dir_all_durably(&dir).unwrap();
        let storage = FileLogStorage::open_with(dir.join("wal.log"), FileLogOptions::default());
        let (log, _) = LogManager::open(Box::new(storage.unwrap()), config).unwrap();
        let records = write_records(&log, 40, round as u64 + 1);
        let (last, _) = records.last().unwrap();
        log.flush_to(*last).unwrap();
        let cut = mounted
            .cut(0.0, &mut rand::rngs::SmallRng::seed_from_u64(round as u64))
            .unwrap();
        assert_eq!(cut.files_lost, 0, "{cut:?}");
        let image = tempfile::tempdir().unwrap();
        std::fs::copy(dir.join("wal.log"), image.path().join("wal.log")).unwrap();
        drop(log);
        let storage = FileLogStorage::open_with(image.path().join("wal.log"), Default::default());
        let (copy, _) = LogManager::open(Box::new(storage.unwrap()), config).unwrap();
        let kept: Vec<_> = copy
            .iter_from(copy.first_lsn())
            .collect::<Result<_, _>>()
            .unwrap();
        if sync_write_back {
            assert_eq!(
                kept, records,
                "every record up to the flush survives the cut"
            );
        } else {
            assert!(
                kept.is_empty(),
                "written, never synced: {} kept",
                kept.len()
            );
        }
    }
}

#[test]
fn discarding_behind_a_checkpoint_works_with_preallocation() {
    for sync in LogSync::ALL {
        let options = FileLogOptions {
            sync,
            prealloc_bytes: DEFAULT_PREALLOC_BYTES,
            ..FileLogOptions::default()
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.log");
        let (log, _) = open(&path, options);
        let mut records = write_records(&log, 1200, 1);
        let begin = log.append(&LogRecord::CheckpointBegin);
        records.push((begin, LogRecord::CheckpointBegin));
        records.extend(write_records(&log, 40, 2));
        log.set_checkpoint(begin).unwrap();
        let held_before = log.held_bytes().unwrap().unwrap();
        assert!(
            held_before < begin.0 + (1 << 20),
            "{sync:?}: the preallocated zeros are not counted: {held_before}"
        );
        let blocks_before = std::fs::metadata(&path).unwrap().blocks();
        let len_before = file_len(&path);
        assert_eq!(log.discard_before(begin).unwrap(), begin);
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(
            meta.len(),
            len_before,
            "a discard keeps the size, zeros and all"
        );
        let freed = blocks_before.saturating_sub(meta.blocks()) * 512;
        if freed > 0 {
            // A file system that punches holes freed (about) everything below the start.
            assert!(
                freed + (64 << 10) >= begin.0 - 16,
                "{sync:?}: freed {freed}"
            );
        }
        let kept: Vec<_> = records
            .iter()
            .filter(|(l, _)| *l >= begin)
            .cloned()
            .collect();
        for (lsn, record) in &kept {
            assert_eq!(&log.read(*lsn).unwrap(), record);
        }
        // Writes go on into the preallocated zeros, past the hole.
        let more = write_records(&log, 40, 3);
        let end = log.end_lsn();
        std::mem::forget(log);

        let (log, report) = open(&path, options);
        assert_eq!(
            (report.start, report.checkpoint, report.end),
            (begin, Some(begin), end)
        );
        let scanned: Vec<_> = log.iter_from(begin).collect::<Result<_, _>>().unwrap();
        let expected: Vec<_> = kept.into_iter().chain(more).collect();
        assert_eq!(scanned, expected, "{sync:?}");
    }
}

/// Every file of the log at `path`: the first segment and the later ones beside it.
fn segment_files(path: &Path) -> Vec<std::path::PathBuf> {
    let name = path.file_name().unwrap().to_str().unwrap().to_string();
    let mut files: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_str().unwrap();
            n == name
                || n.strip_prefix(&format!("{name}."))
                    .is_some_and(|s| s.len() == 16 && s.bytes().all(|b| b.is_ascii_hexdigit()))
        })
        .collect();
    files.sort();
    files
}

/// Under the log manager, with segments of 64 KiB: a log of some twenty segments round-trips
/// through reopens; a copy of its files taken while it is live holds every synced record; a
/// checkpoint's discard unlinks the segments behind it, and the log reopens from its start and
/// goes on — under every method, with and without preallocation.
#[test]
fn a_log_in_small_segments_round_trips_copies_and_discards_whole_segments() {
    const SEGMENT: u64 = 64 << 10;
    for sync in LogSync::ALL {
        for prealloc_bytes in [0, 16 << 10] {
            let options = FileLogOptions {
                sync,
                prealloc_bytes,
                segment_bytes: SEGMENT,
            };
            let what = format!("{options:?}");
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("wal.log");
            let (log, _) = open(&path, options);
            let mut records = write_records(&log, 300, 1);
            let segments = log.end_lsn().0.div_ceil(SEGMENT) as usize;
            assert!(segments >= 15, "{what}: {segments} segments");
            assert_eq!(segment_files(&path).len(), segments, "{what}");

            // A crash image: every file copied while the log is live.
            log.append_update(TxnId(77), Lsn::NONE, b"not forced");
            let image_dir = tempfile::tempdir().unwrap();
            for file in segment_files(&path) {
                std::fs::copy(&file, image_dir.path().join(file.file_name().unwrap())).unwrap();
            }
            let (copy, report) = open(&image_dir.path().join("wal.log"), options);
            assert!(report.records >= records.len() as u64, "{what}");
            check_records_prefix(&copy, &records, &what);
            drop(copy);

            // A checkpoint past the middle, and its discard.
            let begin = log.append(&LogRecord::CheckpointBegin);
            records.push((begin, LogRecord::CheckpointBegin));
            records.extend(write_records(&log, 60, 2));
            log.set_checkpoint(begin).unwrap();
            assert_eq!(log.discard_before(begin).unwrap(), begin);
            let left = segment_files(&path);
            assert_eq!(
                left.len(),
                1 + (log.end_lsn().0.div_ceil(SEGMENT) - begin.0 / SEGMENT) as usize,
                "{what}: the first segment and those from the start on: {left:?}"
            );
            let more = write_records(&log, 40, 3);
            let end = log.end_lsn();
            drop(log);

            let (log, report) = open(&path, options);
            assert_eq!(
                (report.start, report.checkpoint, report.end),
                (begin, Some(begin), end),
                "{what}"
            );
            let scanned: Vec<_> = log.iter_from(begin).collect::<Result<_, _>>().unwrap();
            let expected: Vec<_> = records
                .iter()
                .filter(|(l, _)| *l >= begin)
                .cloned()
                .chain(more)
                .collect();
            assert!(
                scanned == expected,
                "{what}: the log from its start differs"
            );
            log.check_invariants();
        }
    }
}

/// Every record of `records` reads back from `log` (which may hold more after them).
fn check_records_prefix(log: &LogManager, records: &[(Lsn, LogRecord)], what: &str) {
    for (lsn, record) in records {
        assert_eq!(&log.read(*lsn).unwrap(), record, "{what}: record at {lsn}");
    }
    log.check_invariants();
}

/// A segment file missing in the middle of the log is refused by name, never taken for a torn
/// tail (which would cut every later record); one missing below the log's start, as discards
/// and a crash during one leave, is not.
#[test]
fn a_missing_segment_past_the_start_is_refused_and_one_below_it_is_not() {
    const SEGMENT: u64 = 64 << 10;
    let options = FileLogOptions {
        segment_bytes: SEGMENT,
        ..FileLogOptions::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wal.log");
    let (log, _) = open(&path, options);
    let mut records = write_records(&log, 152, 1);
    let begin = log.append(&LogRecord::CheckpointBegin);
    records.push((begin, LogRecord::CheckpointBegin));
    records.extend(write_records(&log, 152, 2));
    log.set_checkpoint(begin).unwrap();
    let end = log.end_lsn();
    let name_at = |offset: u64| dir.path().join(format!("wal.log.{offset:016x}"));
    assert!(begin.0 > 6 * SEGMENT, "{begin}");
    let stale: Vec<_> = [2, 4]
        .map(|k| {
            (
                name_at(k * SEGMENT),
                std::fs::read(name_at(k * SEGMENT)).unwrap(),
            )
        })
        .into();
    assert_eq!(log.discard_before(begin).unwrap(), begin);
    drop(log);

    // Below the start (the checkpoint's begin) whole segments are gone, and two back again (a
    // crash may bring unlinked files back): gaps there lose nothing.
    for (file, bytes) in &stale {
        std::fs::write(file, bytes).unwrap();
    }
    let (log, report) = open(&path, options);
    assert_eq!(
        (report.start, report.end, report.cut_bytes),
        (begin, end, 0)
    );
    drop(log);
    let files = segment_files(&path);
    assert!(files.len() > 5, "{files:?}");

    // Past it: refused, the gap named, and nothing cut.
    let past = (end.0 / SEGMENT - 1) * SEGMENT;
    assert!(past > begin.0);
    let lengths =
        |files: &[std::path::PathBuf]| -> Vec<u64> { files.iter().map(|f| file_len(f)).collect() };
    let before = lengths(&files);
    std::fs::rename(name_at(past), dir.path().join("elsewhere")).unwrap();
    let storage = FileLogStorage::open_with(&path, options).unwrap();
    let err = LogManager::open(Box::new(storage), LogConfig::default())
        .err()
        .expect("a log with a segment missing opened");
    match &err {
        wal::WalError::Missing { from, to } => {
            assert_eq!((from.0, to.0), (past, past + SEGMENT), "{err}")
        }
        other => panic!("not a missing segment: {other}"),
    }
    assert!(err.to_string().contains("segment file"), "{err}");
    std::fs::rename(dir.path().join("elsewhere"), name_at(past)).unwrap();
    assert_eq!(
        lengths(&segment_files(&path)),
        before,
        "the refused open cut nothing"
    );
    let (log, report) = open(&path, options);
    assert_eq!((report.start, report.end), (begin, end));
    let scanned: Vec<_> = log.iter_from(begin).collect::<Result<_, _>>().unwrap();
    let expected: Vec<_> = records.into_iter().filter(|(l, _)| *l >= begin).collect();
    assert!(scanned == expected);
}
