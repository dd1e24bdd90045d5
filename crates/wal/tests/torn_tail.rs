//! Torn-tail handling on a real log file: a log cut inside its last record, overwritten with
//! garbage to its end, or followed by zeroes opens at the last intact record, reports the cut,
//! accepts appends, and reopens with them.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;

use rand::{Rng, SeedableRng};
use storage::Lsn;
use wal::{FileLogStorage, LogConfig, LogManager, LogRecord, OpenReport, TxnId, WalError};

fn open(path: &Path) -> (LogManager, OpenReport) {
    LogManager::open(
        Box::new(FileLogStorage::open(path).unwrap()),
        LogConfig::default(),
    )
    .unwrap()
}

/// Writes a log of `n` updates and a final commit; returns every record's LSN and the end.
fn write_log(path: &Path, n: u64) -> (Vec<Lsn>, u64) {
    let (log, _) = open(path);
    let mut lsns = Vec::new();
    let mut prev = Lsn::NONE;
    for i in 0..n {
        prev = log.append_update(TxnId(1), prev, &[i as u8; 40]);
        lsns.push(prev);
    }
    lsns.push(log.commit(TxnId(1), prev).unwrap());
    let end = log.end_lsn().0;
    (lsns, end)
}

fn records(log: &LogManager) -> Vec<(Lsn, LogRecord)> {
    log.iter_from(log.first_lsn())
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Checks that the damaged log at `path` opens ending at `intact_end`, and that an append after
/// the cut survives a reopen.
fn check_recovers(path: &Path, intact_end: u64, damaged_len: u64, intact_records: usize) {
    let (log, report) = open(path);
    assert_eq!(report.end, Lsn(intact_end));
    assert_eq!(report.cut_bytes, damaged_len - intact_end);
    assert_eq!(report.cut_reason.is_some(), damaged_len > intact_end);
    assert_eq!(report.records as usize, intact_records);
    assert_eq!(std::fs::metadata(path).unwrap().len(), intact_end);
    let lsn = log.append_update(TxnId(2), Lsn::NONE, b"after the cut");
    assert_eq!(lsn, Lsn(intact_end));
    log.commit(TxnId(2), lsn).unwrap();
    log.check_invariants();
    drop(log);
    let (log, report) = open(path);
    assert_eq!(report.cut_bytes, 0);
    let all = records(&log);
    assert_eq!(all.len(), intact_records + 2);
    assert_eq!(
        all[intact_records].1,
        LogRecord::Update {
            txn: TxnId(2),
            prev: Lsn::NONE,
            payload: b"after the cut".to_vec()
        }
    );
}

#[test]
fn cut_at_every_byte_inside_the_last_record() {
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("original");
    let (lsns, end) = write_log(&original, 5);
    let last = lsns.last().unwrap().0;
    let bytes = std::fs::read(&original).unwrap();
    assert_eq!(bytes.len() as u64, end);
    for cut in last..end {
        let path = dir.path().join(format!("cut-{cut}"));
        std::fs::write(&path, &bytes[..cut as usize]).unwrap();
        check_recovers(&path, last, cut, lsns.len() - 1);
    }
    // Uncut, the whole log is intact.
    check_recovers(&original, end, end, lsns.len());
}

#[test]
fn garbage_over_the_tail_ends_the_log_at_the_last_intact_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
    for round in 0..20 {
        let path = dir.path().join(format!("garbage-{round}"));
        let (lsns, end) = write_log(&path, 6);
        // Overwrite from somewhere inside record k to the end or past it with random bytes
        // (garbage that stops short of the end, with intact records after it, is damage: see
        // mid_log_damage.rs); the first garbage byte surely differs from the byte it replaces.
        let k = rng.gen_range(1..lsns.len());
        let from = rng.gen_range(lsns[k].0..lsns.get(k + 1).map_or(end, |l| l.0));
        let original = std::fs::read(&path).unwrap();
        let reach = (end - from) as usize;
        let mut garbage: Vec<u8> = (0..rng.gen_range(reach..reach + 300))
            .map(|_| rng.gen())
            .collect();
        garbage[0] = !original[from as usize];
        let file = OpenOptions::new().write(true).open(&path).unwrap();
        file.write_all_at(&garbage, from).unwrap();
        drop(file);
        let damaged_len = (from + garbage.len() as u64).max(end);
        check_recovers(&path, lsns[k].0, damaged_len, k);
    }
}

#[test]
fn zeroed_tail_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("zeroed");
    let (lsns, end) = write_log(&path, 4);
    // A file system that extended the file but never wrote the data leaves zeroes.
    let mut file = OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(&[0u8; 4096]).unwrap();
    drop(file);
    check_recovers(&path, end, end + 4096, lsns.len());
}

#[test]
fn a_flipped_bit_in_the_last_record_cuts_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flipped");
    let (lsns, end) = write_log(&path, 3);
    let last = lsns.last().unwrap().0;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let mut byte = [0u8; 1];
    file.read_exact_at(&mut byte, last + 12).unwrap();
    file.write_all_at(&[byte[0] ^ 0x10], last + 12).unwrap();
    check_recovers(&path, last, end, lsns.len() - 1);
}

#[test]
fn a_partial_header_is_rewritten_and_a_foreign_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let partial = dir.path().join("partial");
    std::fs::write(&partial, b"GLASS").unwrap();
    let (log, report) = open(&partial);
    assert!(report.created);
    assert_eq!(report.cut_bytes, 5);
    assert_eq!(log.end_lsn(), log.first_lsn());
    drop(log);

    let foreign = dir.path().join("foreign");
    std::fs::write(&foreign, b"this is not a log file at all").unwrap();
    let result = LogManager::open(
        Box::new(FileLogStorage::open(&foreign).unwrap()),
        LogConfig::default(),
    );
    assert!(matches!(result, Err(WalError::BadHeader(_))));
    // The foreign file is left untouched.
    assert_eq!(
        std::fs::read(&foreign).unwrap(),
        b"this is not a log file at all"
    );
}

#[test]
fn a_master_naming_a_cut_checkpoint_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let (log, _) = open(&path);
    log.append_update(TxnId(1), Lsn::NONE, b"x");
    let begin = log.append(&LogRecord::CheckpointBegin);
    log.append(&LogRecord::CheckpointEnd {
        begin,
        active: vec![],
        dirty: vec![],
        meta: vec![1, 2, 3],
    });
    log.set_checkpoint(begin).unwrap();
    drop(log);
    // Damage: the log loses its checkpoint records (as if a disk lost them).
    let file = OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(begin.0 + 3).unwrap();
    drop(file);
    let (log, report) = open(&path);
    assert_eq!(report.end, begin);
    assert!(report.master_ignored);
    assert_eq!(report.checkpoint, None);
    assert_eq!(log.last_checkpoint(), None);
}

/// The header of a version-1 log (CRC-32 checksums), as the builds before CRC-32C wrote it.
fn version_1_header() -> Vec<u8> {
    let mut header = b"GLASSWAL".to_vec();
    header.extend_from_slice(&1u32.to_le_bytes());
    let crc = crc32fast::hash(&header);
    header.extend_from_slice(&crc.to_le_bytes());
    header
}

#[test]
fn a_log_of_an_older_format_version_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old");
    let mut bytes = version_1_header();
    // One version-1 frame (a `CheckpointBegin`): length 9, CRC-32 of len and kind.
    let mut frame = 9u32.to_le_bytes().to_vec();
    let crc = crc32fast::hash(&[9, 0, 0, 0, 7]);
    frame.extend_from_slice(&crc.to_le_bytes());
    frame.push(7);
    bytes.extend_from_slice(&frame);
    std::fs::write(&path, &bytes).unwrap();
    let result = LogManager::open(
        Box::new(FileLogStorage::open(&path).unwrap()),
        LogConfig::default(),
    );
    let Err(err) = result else {
        panic!("a version-1 log was opened");
    };
    assert!(
        matches!(
            err,
            WalError::UnsupportedVersion {
                what: "log",
                found: 1,
                supported: wal::log::LOG_VERSION,
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("format version 1"), "{err}");
    // Nothing was cut or rewritten: the old build can still recover it.
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
}

#[test]
fn a_master_record_of_an_older_format_version_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let (log, _) = open(&path);
    let begin = log.append(&LogRecord::CheckpointBegin);
    log.set_checkpoint(begin).unwrap();
    drop(log);
    let storage = FileLogStorage::open(&path).unwrap();
    let mut master = wal::LogStorage::read_master(&storage).unwrap().unwrap();
    master[4..8].copy_from_slice(&1u32.to_le_bytes());
    let crc = crc32fast::hash(&master[..16]);
    master[16..20].copy_from_slice(&crc.to_le_bytes());
    wal::LogStorage::write_master(&storage, &master).unwrap();
    let result = LogManager::open(Box::new(storage), LogConfig::default());
    assert!(
        matches!(
            result,
            Err(WalError::UnsupportedVersion {
                what: "master record",
                found: 1,
                ..
            })
        ),
        "{:?}",
        result.err()
    );
}

#[test]
fn a_header_with_a_bad_checksum_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    drop(open(&path));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    file.write_all_at(&[0xEE], 13).unwrap();
    let result = LogManager::open(
        Box::new(FileLogStorage::open(&path).unwrap()),
        LogConfig::default(),
    );
    assert!(
        matches!(result, Err(WalError::BadHeader("bad header checksum"))),
        "{:?}",
        result.err()
    );
}
