//! The log is discarded behind checkpoints: a durable database that writes many times its
//! checkpoint interval of log keeps only a few intervals of it (on disk and in memory), a
//! transaction running across checkpoints pins the log back to its first record (its rollback,
//! before or after a crash, still finds every record), and recovery after a crash restores
//! exactly the committed state.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::*;
use engine::{Database, DbConfig, TableRef, Tx, Value};
use storage::Lsn;

const ACCOUNTS: i64 = 400;
const CHECKPOINT_BYTES: u64 = 128 << 10;
/// Accounts a long-running transaction changes; the short ones stay clear of them (a lock
/// wait would block this single thread).
const PINNED: i64 = 20;

fn config(path: Option<&Path>) -> DbConfig {
    DbConfig {
        path: path.map(Path::to_path_buf),
        durable: true,
        pool_mib: 2,
        threads: 2,
        checkpoint_bytes: CHECKPOINT_BYTES,
        ..DbConfig::default()
    }
}

/// [`config`] with log files of `segment_bytes` each.
fn config_segments(path: &Path, segment_bytes: u64) -> DbConfig {
    DbConfig {
        log_segment_bytes: segment_bytes,
        ..config(Some(path))
    }
}

/// The log's files in `dir` (`wal.log` and the segments after it): how many, and their
/// lengths added up.
fn log_files(dir: &Path) -> (usize, u64) {
    let mut count = 0;
    let mut bytes = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let segment = name
            .strip_prefix("wal.log.")
            .is_some_and(|s| s.len() == 16 && s.bytes().all(|b| b.is_ascii_hexdigit()));
        if name == "wal.log" || segment {
            count += 1;
            bytes += entry.metadata().unwrap().len();
        }
    }
    (count, bytes)
}

/// The committed state the database must hold: every balance, every receipt.
struct Model {
    balances: Vec<i64>,
    receipts: Vec<i64>,
    seq: i64,
}

impl Model {
    fn new() -> Model {
        Model {
            balances: vec![100; ACCOUNTS as usize],
            receipts: Vec::new(),
            seq: 0,
        }
    }

    /// One committed transaction of 30 transfers among the unpinned accounts and a receipt.
    fn run_one(&mut self, db: &Database, t: &TableRef, r: &TableRef) {
        self.seq += 1;
        let seq = self.seq;
        let moves: Vec<(i64, i64)> = (0..30)
            .map(|i| {
                let from = PINNED + (seq * 7 + i * 13) % (ACCOUNTS - PINNED);
                let to = PINNED + (seq * 11 + i * 17 + 1) % (ACCOUNTS - PINNED);
                (from, to)
            })
            .filter(|(from, to)| from != to)
            .collect();
        db.run(|tx| {
            for (from, to) in &moves {
                transfer(tx, t, *from, *to, 1)?;
            }
            tx.insert(r, &[Value::Int(seq), Value::Int(1)])?;
            Ok(())
        })
        .unwrap();
        for (from, to) in moves {
            self.balances[from as usize] -= 1;
            self.balances[to as usize] += 1;
        }
        self.receipts.push(seq);
    }

    fn check(&self, db: &Database, t: &TableRef, r: &TableRef) {
        let column = |table: &TableRef, c: usize| -> Vec<i64> {
            dump(db, table)
                .iter()
                .map(|row| row[c].as_int().unwrap())
                .collect()
        };
        assert_eq!(
            column(t, 2),
            self.balances,
            "balances differ from the committed ones"
        );
        assert_eq!(
            column(r, 0),
            self.receipts,
            "receipts differ from the committed ones"
        );
    }
}

/// (start, live bytes, end) of the database's log.
fn log_extent(db: &Database) -> (Lsn, u64, Lsn) {
    let log = db.log().unwrap();
    let stats = log.stats();
    (stats.start, stats.live_bytes, log.end_lsn())
}

/// Runs transactions until the log has grown by `intervals` checkpoint intervals; returns the
/// largest live size seen after a commit.
fn run_intervals(
    db: &Database,
    t: &TableRef,
    r: &TableRef,
    model: &mut Model,
    intervals: u64,
) -> u64 {
    let until = log_extent(db).2 .0 + intervals * CHECKPOINT_BYTES;
    let mut live_max = 0;
    while log_extent(db).2 .0 < until {
        model.run_one(db, t, r);
        live_max = live_max.max(log_extent(db).1);
    }
    live_max
}

/// Starts a transaction that inserts a receipt (its first record: the insert path) and sets
/// every pinned account to -1,000,000; left running.
fn start_long<'db>(
    db: &'db Database,
    r: &TableRef,
    t: &TableRef,
) -> (engine::Transaction<'db>, Lsn) {
    let first = db.log().unwrap().end_lsn();
    let mut tx = db.begin().unwrap();
    tx.insert(r, &[Value::Int(-1), Value::Int(0)]).unwrap();
    for id in 0..PINNED / 2 {
        tx.update(t, &[Value::Int(id)], &[(2, Value::Int(-1_000_000))])
            .unwrap();
    }
    (tx, first)
}

/// Runs `intervals` checkpoint intervals of transactions and checks the log kept fewer than
/// four of them live throughout, and starts within four of its end; returns the largest live
/// size seen.
fn assert_log_stays_bounded(
    db: &Database,
    t: &TableRef,
    r: &TableRef,
    model: &mut Model,
    intervals: u64,
) -> u64 {
    let live_max = run_intervals(db, t, r, model, intervals);
    let (start, _, end) = log_extent(db);
    assert!(
        end.0 > intervals * CHECKPOINT_BYTES,
        "the log grew to {end} only"
    );
    assert!(
        live_max < 4 * CHECKPOINT_BYTES,
        "the live log reached {live_max} bytes, {} intervals",
        live_max as f64 / CHECKPOINT_BYTES as f64
    );
    assert!(
        start.0 > end.0 - 4 * CHECKPOINT_BYTES,
        "start {start}, end {end}"
    );
    live_max
}

/// Runs `rounds` rounds of two checkpoint intervals of other transactions, `long` changing
/// one more pinned account each round; the log must keep `long`'s first record throughout.
fn keep_running(
    db: &Database,
    t: &TableRef,
    r: &TableRef,
    model: &mut Model,
    long: &mut engine::Transaction<'_>,
    first: Lsn,
    rounds: i64,
) {
    for round in 0..rounds {
        run_intervals(db, t, r, model, 2);
        long.update(
            t,
            &[Value::Int(PINNED / 2 + round)],
            &[(2, Value::Int(-1_000_000))],
        )
        .unwrap();
        let (start, _, _) = log_extent(db);
        assert!(
            start <= first,
            "start {start} passed the running transaction's first record {first}"
        );
    }
}

#[test]
fn a_durable_database_on_disk_keeps_a_bounded_log_and_recovers() {
    keeps_a_bounded_log_and_recovers(wal::storage::DEFAULT_SEGMENT_BYTES);
}

/// With log segments smaller than a checkpoint interval, the log lives in many files: those
/// behind each checkpoint are unlinked, so the files' lengths added up stay near what the log
/// holds (with one file it is the log's whole history, in holes); a transaction running across
/// checkpoints keeps its segments, and its rollback and recovery read across them.
#[test]
fn a_durable_database_in_small_log_segments_keeps_few_files_and_recovers() {
    keeps_a_bounded_log_and_recovers(32 << 10);
}

fn keeps_a_bounded_log_and_recovers(segment_bytes: u64) {
    let small = segment_bytes < CHECKPOINT_BYTES;
    let dir = tempfile::tempdir().unwrap();
    let config = || config_segments(dir.path(), segment_bytes);
    let db = Database::open(config()).unwrap();
    let t = load_accounts(&db, ACCOUNTS);
    let r = db.create_table(receipts_schema()).unwrap();
    let mut model = Model::new();

    // Phase 1: many intervals of log; only a few stay, on disk too.
    let live_max = assert_log_stays_bounded(&db, &t, &r, &mut model, 24);
    let held = db.log().unwrap().held_bytes().unwrap().unwrap();
    let len = std::fs::metadata(dir.path().join("wal.log")).unwrap().len();
    eprintln!("log: {len} bytes long, {held} held on disk, live at most {live_max}");
    if held < len / 2 || small {
        assert!(held < 6 * CHECKPOINT_BYTES, "{held} bytes held on disk");
    } else {
        eprintln!("this file system does not punch holes: checked the logical discard only");
    }
    let (files, files_bytes) = log_files(dir.path());
    let (_, _, end) = log_extent(&db);
    eprintln!("{files} log files of {files_bytes} bytes in all, the log ending at {end}");
    if small {
        assert!(
            end.0 > 40 * segment_bytes,
            "the log crossed many segments: {end}"
        );
        // The first file (at most a segment, holding the header), then the live log's
        // segments and one being filled.
        assert!(
            files_bytes <= live_max + 3 * segment_bytes,
            "{files} files of {files_bytes} bytes for a live log of at most {live_max}"
        );
    } else {
        assert_eq!(files, 1, "the log fits one file");
    }

    // Phase 2: a transaction running across several checkpoints pins the log at its first
    // record; its rollback reads every record back.
    let (mut long, first) = start_long(&db, &r, &t);
    keep_running(&db, &t, &r, &mut model, &mut long, first, 6);
    let (_, live, _) = log_extent(&db);
    assert!(
        live > 10 * CHECKPOINT_BYTES,
        "the running transaction did not pin the log: {live}"
    );
    if small {
        let (files, _) = log_files(dir.path());
        assert!(
            files as u64 > live / segment_bytes,
            "its segments are kept: {files} files for {live} bytes"
        );
    }
    long.abort().unwrap();
    model.check(&db, &t, &r);
    // Once it is gone, the log shrinks back.
    run_intervals(&db, &t, &r, &mut model, 4);
    let (start, live, _) = log_extent(&db);
    assert!(
        start > first && live < 4 * CHECKPOINT_BYTES,
        "start {start}, live {live}"
    );

    // Phase 3: another one across checkpoints, then a crash (the pool's pages are lost, the
    // log is what was written): recovery must roll it back from records far behind the end.
    let (mut long, first) = start_long(&db, &r, &t);
    keep_running(&db, &t, &r, &mut model, &mut long, first, 4);
    let (start, _, end) = log_extent(&db);
    assert!(start <= first && end.0 - first.0 > 6 * CHECKPOINT_BYTES);
    db.log().unwrap().flush_to(end).unwrap();
    std::mem::forget(long);
    drop((t, r));
    drop(db);

    let db = Database::open(config()).unwrap();
    let t = db.table("accounts").unwrap();
    let r = db.table("receipts").unwrap();
    model.check(&db, &t, &r);
    db.check_invariants().unwrap();
    // Recovery's closing checkpoint discarded everything before it.
    let (start, live, _) = log_extent(&db);
    assert!(
        start > end,
        "start {start} after recovery, end before {end}"
    );
    assert!(live < CHECKPOINT_BYTES, "{live}");
    // And the database goes on, across a clean close and open.
    run_intervals(&db, &t, &r, &mut model, 3);
    drop((t, r));
    db.close().unwrap();
    let db = Database::open(config()).unwrap();
    let t = db.table("accounts").unwrap();
    let r = db.table("receipts").unwrap();
    model.check(&db, &t, &r);
}

/// The same bound with the checkpoints taken by the background checkpointer: commits only
/// ask for them, and the thread keeps up; a clean close stops it and nothing is lost.
#[test]
fn background_checkpoints_keep_the_log_bounded_and_the_data_whole() {
    let dir = tempfile::tempdir().unwrap();
    let background = || DbConfig {
        background_checkpoints: true,
        ..config(Some(dir.path()))
    };
    let db = Database::open(background()).unwrap();
    let t = load_accounts(&db, ACCOUNTS);
    let r = db.create_table(receipts_schema()).unwrap();
    let mut model = Model::new();
    assert_log_stays_bounded(&db, &t, &r, &mut model, 24);
    let taken = db.background_checkpoints_taken();
    assert!(taken > 0, "no checkpoint was taken in the background");
    // The thread's checkpoints are timed as a commit's are.
    assert!(db.take_checkpoint_times().longest_ns > 0);
    model.check(&db, &t, &r);
    drop((t, r));
    db.close().unwrap();

    let db = Database::open(background()).unwrap();
    let recovered = db.recovery().unwrap();
    assert_eq!(
        (recovered.redone, recovered.losers),
        (0, 0),
        "a clean close leaves nothing to recover: {recovered}"
    );
    let t = db.table("accounts").unwrap();
    let r = db.table("receipts").unwrap();
    model.check(&db, &t, &r);
    drop((t, r));
    db.close().unwrap();
}

#[test]
fn a_durable_database_in_memory_checkpoints_and_frees_its_log() {
    let db: Arc<Database> = Database::open(config(None)).unwrap();
    let t = load_accounts(&db, ACCOUNTS);
    let r = db.create_table(receipts_schema()).unwrap();
    let mut model = Model::new();
    let mut held_max = 0;
    for _ in 0..12 {
        run_intervals(&db, &t, &r, &mut model, 3);
        held_max = held_max.max(db.log().unwrap().held_bytes().unwrap().unwrap());
    }
    let (start, live, end) = log_extent(&db);
    assert!(end.0 > 30 * CHECKPOINT_BYTES, "the log grew to {end} only");
    assert!(
        start.0 > end.0 - 4 * CHECKPOINT_BYTES,
        "start {start}, end {end}"
    );
    assert!(live < 4 * CHECKPOINT_BYTES, "{live}");
    // Memory held: at most twice the live log (the buffer's slack), never the whole log.
    assert!(
        held_max < 8 * CHECKPOINT_BYTES,
        "the in-memory log held {held_max} bytes of a {end} byte log"
    );
    // A rollback of a transaction running across checkpoints still reads its records.
    let (long, first) = start_long(&db, &r, &t);
    run_intervals(&db, &t, &r, &mut model, 6);
    assert!(log_extent(&db).0 <= first);
    long.abort().unwrap();
    model.check(&db, &t, &r);
}

#[test]
fn a_database_on_disk_that_never_forces_its_log_discards_it_too() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(DbConfig {
        durable: false,
        ..config(Some(dir.path()))
    })
    .unwrap();
    assert_eq!(db.log().unwrap().mode(), wal::LogMode::NoForce);
    let t = load_accounts(&db, ACCOUNTS);
    let r = db.create_table(receipts_schema()).unwrap();
    let mut model = Model::new();
    assert_log_stays_bounded(&db, &t, &r, &mut model, 16);
    // Closed cleanly, it reopens from its start with every committed change.
    db.close().unwrap();
    let db = Database::open(DbConfig {
        durable: false,
        ..config(Some(dir.path()))
    })
    .unwrap();
    model.check(
        &db,
        &db.table("accounts").unwrap(),
        &db.table("receipts").unwrap(),
    );
}

/// Full-page images do not bring checkpoints sooner: each checkpoint writes pages back, and
/// each page written back logs its whole image at its next change; counted toward the
/// interval, those images made the next checkpoint due sooner, which wrote more pages back.
/// The same transfers take as many checkpoints with images as without (one more at most,
/// where the last interval ends), and with images no interval holds more than
/// [`engine::IMAGE_ALLOWANCE`] intervals of log.
#[test]
fn page_images_do_not_bring_checkpoints_sooner() {
    const ROWS: i64 = 20_000;
    const INTERVAL: u64 = 256 << 10;
    let mut taken = Vec::new();
    for images in [engine::FullPageImages::Off, engine::FullPageImages::On] {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(DbConfig {
            path: Some(dir.path().to_path_buf()),
            durable: true,
            checkpoint_bytes: INTERVAL,
            full_page_images: images,
            // Images alone: the doublewrite file would make them unneeded.
            doublewrite: engine::Doublewrite::Off,
            ..DbConfig::default()
        })
        .unwrap();
        let t = load_accounts(&db, ROWS);
        let log = db.log().unwrap();
        let (start, before) = (log.end_lsn(), db.checkpoints_in_commits());
        db.take_checkpoint_times();
        let mut pick = 1u64;
        for _ in 0..6_000 {
            pick = pick
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let from = (pick >> 33) as i64 % ROWS;
            let to = (from + 1 + (pick >> 13) as i64 % (ROWS - 1)) % ROWS;
            db.run(|tx| transfer(tx, &t, from, to, 1)).unwrap();
        }
        let checkpoints = db.checkpoints_in_commits() - before;
        // Each checkpoint a commit took is timed; reading the times starts them again.
        let times = db.take_checkpoint_times();
        assert_eq!(times.longest_ns > 0, checkpoints > 0, "{times:?}");
        assert!(times.total_ns >= times.longest_ns, "{times:?}");
        assert_eq!(
            db.take_checkpoint_times(),
            engine::CheckpointTimes::default()
        );
        let grown = log.end_lsn().0 - start.0;
        let images_logged = db.pool().unwrap().image_bytes();
        assert_eq!(
            images_logged > 0,
            images == engine::FullPageImages::On,
            "{images_logged} bytes of images"
        );
        assert!(
            grown <= (checkpoints + 1) * (engine::IMAGE_ALLOWANCE * INTERVAL + INTERVAL),
            "{grown} bytes of log in {checkpoints} checkpoints"
        );
        assert_eq!(total(&db, &t), ROWS * 100);
        taken.push((checkpoints, images_logged, grown));
    }
    let (off, on) = (taken[0], taken[1]);
    assert!(off.0 >= 3, "too few checkpoints to compare: {taken:?}");
    // The images were most of the log: counted, they would have brought checkpoints sooner.
    assert!(on.1 > on.2 / 2, "images not most of the log: {taken:?}");
    assert!(on.0 <= off.0 + 1, "images brought checkpoints: {taken:?}");
}
