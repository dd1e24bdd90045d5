//! The pages of B+-tree leaves emptied by deletes are allocated again (`DbConfig::reuse_pages`,
//! `storage::BufferPool::enable_page_reuse`), once no transaction that began before the unlink
//! is still running. A queue (inserts at one end, deletes at the other, as TPC-C's new orders)
//! then stops growing its page file, and what it holds survives a close and a crash. The
//! unlinked leaves a run leaves behind are handed out again by the next open, after a close
//! (the last checkpoint lists them) or a crash (recovery's redo finds them marked), those a
//! rolled-back delete unlinked among them.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::receipts_schema;
use engine::{Database, DbConfig, Fetch, TableRef, Tx, Value};

/// Keys a round appends and deletes (about two 8 KiB leaves of the primary index).
const BATCH: i64 = 800;

fn open(dir: &Path, reuse_pages: bool) -> Arc<Database> {
    Database::open(DbConfig {
        path: Some(dir.to_path_buf()),
        pool_mib: 64,
        reuse_pages,
        ..DbConfig::default()
    })
    .unwrap()
}

/// The queue `[head, tail)` of receipts.
struct Queue {
    t: TableRef,
    head: i64,
    tail: i64,
}

impl Queue {
    /// One round: appends a batch at the tail and, once two batches are in, deletes the
    /// oldest at the head, a hundred rows a transaction.
    fn round(&mut self, db: &Database) {
        for chunk in (self.tail..self.tail + BATCH)
            .collect::<Vec<_>>()
            .chunks(100)
        {
            db.run(|tx| {
                for &seq in chunk {
                    tx.insert(&self.t, &[Value::Int(seq), Value::Int(seq * 3)])?;
                }
                Ok(())
            })
            .unwrap();
        }
        self.tail += BATCH;
        if self.tail - self.head > 2 * BATCH {
            for chunk in (self.head..self.head + BATCH)
                .collect::<Vec<_>>()
                .chunks(100)
            {
                db.run(|tx| {
                    for &seq in chunk {
                        assert!(tx.delete(&self.t, &[Value::Int(seq)])?, "{seq} missing");
                    }
                    Ok(())
                })
                .unwrap();
            }
            self.head += BATCH;
        }
    }

    /// Every row the queue holds, in key order, as it should be.
    fn check(&self, db: &Database) {
        let rows = common::dump(db, &self.t);
        let seqs: Vec<i64> = rows
            .iter()
            .map(|r| match (&r[0], &r[1]) {
                (Value::Int(seq), Value::Int(amount)) => {
                    assert_eq!(*amount, seq * 3, "row {seq}");
                    *seq
                }
                other => panic!("not a receipt: {other:?}"),
            })
            .collect();
        assert_eq!(seqs, (self.head..self.tail).collect::<Vec<_>>());
    }
}

/// Pages the page file holds after `rounds` more rounds of `queue`.
fn pages_after(db: &Database, queue: &mut Queue, rounds: usize) -> u64 {
    for _ in 0..rounds {
        queue.round(db);
    }
    db.pool().unwrap().page_count()
}

/// With reuse, the queue's page file stops growing once the queue is at its length; without,
/// it grows by the drained leaves' pages every round. Either way the queue reads back whole,
/// the integrity check finds every page that no structure reaches among the retired ones, and
/// the database opens again with the same rows.
#[test]
fn a_queue_stops_growing_its_page_file_once_drained_leaves_are_reused() {
    let mut growth = Vec::new();
    for reuse in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path(), reuse);
        let t = db.create_table(receipts_schema()).unwrap();
        let mut queue = Queue {
            t,
            head: 0,
            tail: 0,
        };
        let settled = pages_after(&db, &mut queue, 20);
        let later = pages_after(&db, &mut queue, 100);
        growth.push(later - settled);
        queue.check(&db);
        let stats = db.pool().unwrap().reuse_stats();
        let report = db.verify_integrity(10);
        assert!(report.faults.is_empty(), "{:?}", report.faults);
        if reuse {
            assert!(stats.reused > 50, "{stats:?}");
            assert!(
                report.unreached_pages <= stats.waiting,
                "{} pages unreached, {stats:?}",
                report.unreached_pages
            );
        } else {
            assert_eq!(stats.reused, 0);
        }
        let t = queue.t.clone();
        drop(queue.t);
        drop(t);
        db.close().unwrap();
        let db = open(dir.path(), reuse);
        let t = db.table("receipts").unwrap();
        queue.t = t;
        queue.check(&db);
        // And it goes on after the open (the retired pages of the last run are kept).
        pages_after(&db, &mut queue, 5);
        queue.check(&db);
        drop(queue.t);
        db.close().unwrap();
    }
    let (with, without) = (growth[0], growth[1]);
    assert!(
        with <= 4 && without >= 50,
        "pages added over 100 rounds: {with} with reuse, {without} without"
    );
}

/// A transaction that began before leaves were unlinked holds their pages back until it
/// ends (it may hold their ids: a leaf hint, a backward scan); then they are reused.
#[test]
fn a_running_transaction_holds_back_the_pages_unlinked_after_it_began() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), true);
    let t = db.create_table(receipts_schema()).unwrap();
    let mut queue = Queue {
        t: t.clone(),
        head: 0,
        tail: 0,
    };
    for _ in 0..4 {
        queue.round(&db);
    }
    let pool = db.pool().unwrap().clone();
    let before = pool.reuse_stats();
    let accounts = common::load_accounts(&db, 10);
    // A transaction begun now (it reads a row of another table, so as to hold no lock the
    // queue's deletes wait for), still running while another thread drains and refills.
    let mut old = db.begin().unwrap();
    assert!(old
        .get(&accounts, &[Value::Int(3)], Fetch::All, false)
        .unwrap()
        .is_some());
    let queue = std::thread::scope(|s| {
        s.spawn(|| {
            for _ in 0..20 {
                queue.round(&db);
            }
            queue
        })
        .join()
        .unwrap()
    });
    let held = pool.reuse_stats();
    assert!(
        held.retired >= before.retired + 10,
        "no leaf was unlinked: {held:?}"
    );
    // Only pages retired before it began (waiting then) may have been reused meanwhile.
    assert!(
        held.reused - before.reused <= before.waiting,
        "a page was reused while a transaction that began before its unlink ran: {before:?} \
         then {held:?}"
    );
    old.commit().unwrap();
    let mut queue = queue;
    for _ in 0..10 {
        queue.round(&db);
    }
    let after = pool.reuse_stats();
    assert!(after.reused > held.reused, "{after:?}");
    queue.check(&db);
    drop((queue.t, t, accounts));
    db.close().unwrap();
}

/// Copies the files of `from` into `to`: taken while the database is idle and its log forced
/// (a durable commit just returned), what a crash at that moment would leave.
fn crash_image(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

/// The unlinked leaves of the last run are free at the next open, whether it closed (its
/// last checkpoint lists them) or crashed (recovery's redo finds them marked, the leaves a
/// loser's deletes unlinked among them), and a
/// checkpoint's list is only a hint (pages it named and an allocation took since are not
/// free); the next allocations take them before the page file grows, and every row survives.
#[test]
fn the_next_open_hands_out_again_the_leaves_the_last_run_left_unlinked() {
    let config = |dir: &Path| DbConfig {
        path: Some(dir.to_path_buf()),
        pool_mib: 64,
        durable: true,
        // Checkpoints only where the test takes them.
        checkpoint_bytes: u64::MAX,
        ..DbConfig::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(config(dir.path())).unwrap();
    let t = db.create_table(receipts_schema()).unwrap();
    let mut queue = Queue {
        t: t.clone(),
        head: 0,
        tail: 0,
    };
    // (the image, what it is, the leaves unlinked and not allocated again, the queue's rows)
    let mut images = Vec::new();
    let mut image = |what: &'static str, db: &Database, queue: &Queue| {
        let to = tempfile::tempdir().unwrap();
        crash_image(dir.path(), to.path());
        let waiting = db.pool().unwrap().reuse_stats().waiting;
        images.push((to, what, waiting, queue.head, queue.tail));
    };
    for _ in 0..6 {
        queue.round(&db);
    }
    // The last round's deletes unlinked leaves that nothing has allocated since.
    assert!(db.pool().unwrap().reuse_stats().waiting >= 1);
    image("a crash (no checkpoint since the open)", &db, &queue);
    // A checkpoint lists those pages; a round's inserts take them, its deletes unlink others.
    db.checkpoint().unwrap();
    let reused = db.pool().unwrap().reuse_stats().reused;
    queue.round(&db);
    assert!(db.pool().unwrap().reuse_stats().reused > reused);
    image(
        "a crash after a checkpoint listing pages allocated since",
        &db,
        &queue,
    );
    // A loser: it deletes the next batch (unlinking more leaves, a structure change that
    // stays), and is still running when a later commit forces its records to the log. (That
    // commit's allocations may take the free pages; the loser's wait for the loser.)
    let retired = db.pool().unwrap().reuse_stats().retired;
    let mut loser = db.begin().unwrap();
    for seq in queue.head..queue.head + BATCH {
        assert!(loser.delete(&t, &[Value::Int(seq)]).unwrap());
    }
    let accounts = common::load_accounts(&db, 4);
    assert!(
        db.pool().unwrap().reuse_stats().retired > retired,
        "the loser unlinked no leaf"
    );
    image("a crash with a loser's deletes", &db, &queue);
    loser.abort().unwrap();
    drop((t, accounts));
    let (head, tail) = (queue.head, queue.tail);
    drop(queue);
    let at_close = db.pool().unwrap().reuse_stats().waiting;
    db.close().unwrap();
    let closed = tempfile::tempdir().unwrap();
    crash_image(dir.path(), closed.path());
    images.push((closed, "a close", at_close, head, tail));

    let mut free_at_open = 0;
    for (from, what, unlinked, head, tail) in images {
        let db = Database::open(config(from.path())).unwrap();
        let stats = db.pool().unwrap().reuse_stats();
        // Every leaf unlinked and not allocated again is free: after the crash with a loser,
        // its own among them, though its undo put its rows back (and may have taken some).
        assert_eq!(stats.adopted, unlinked, "after {what}: {stats:?}");
        assert_eq!(stats.retired, 0, "after {what}: {stats:?}");
        let report = db.verify_integrity(10);
        assert!(
            report.faults.is_empty(),
            "after {what}: {:?}",
            report.faults
        );
        assert_eq!(
            report.unlinked_leaves, stats.waiting,
            "after {what}: the free pages are the unlinked leaves"
        );
        let mut queue = Queue {
            t: db.table("receipts").unwrap(),
            head,
            tail,
        };
        queue.check(&db);
        // The next allocations take the free pages before the file grows (where the loser's
        // undo, putting its rows back, left any: it may take them all).
        let pages = db.pool().unwrap().page_count();
        queue.round(&db);
        let after = db.pool().unwrap().reuse_stats();
        if stats.waiting > 0 {
            free_at_open += 1;
            assert!(after.reused > stats.reused, "after {what}: {after:?}");
            if after.reused - stats.reused < stats.waiting {
                assert_eq!(db.pool().unwrap().page_count(), pages, "after {what}");
            }
        }
        queue.check(&db);
        let report = db.verify_integrity(10);
        assert!(
            report.faults.is_empty(),
            "after {what}: {:?}",
            report.faults
        );
        drop(queue);
        db.close().unwrap();
    }
    assert!(
        free_at_open >= 3,
        "only {free_at_open} opens found pages free"
    );
}
