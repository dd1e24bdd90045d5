//! Bank transfers under concurrency: money is conserved, no update is lost, no dirty read.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::*;
use engine::{Database, DbConfig, Fetch, Preset, Switch, Switches, Tx, TxError, Value};
use rand::{Rng, SeedableRng};

const ACCOUNTS: i64 = 64;
const THREADS: usize = 4;
const TRANSFERS: usize = 150;

fn run_bank(db: Arc<Database>) {
    let t = load_accounts(&db, ACCOUNTS);
    let retries = Arc::new(AtomicU64::new(0));
    let committed = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..THREADS)
        .map(|i| {
            let (db, t, retries, committed) =
                (db.clone(), t.clone(), retries.clone(), committed.clone());
            std::thread::spawn(move || {
                let mut rng = rand::rngs::SmallRng::seed_from_u64(i as u64);
                for n in 0..TRANSFERS {
                    let from = rng.gen_range(0..ACCOUNTS);
                    let to = (from + rng.gen_range(1..ACCOUNTS)) % ACCOUNTS;
                    loop {
                        let mut tx = db.begin().unwrap();
                        // Every 10th transaction also reads a total over a range, which must
                        // never see a transfer half done (no dirty read). Odd transactions
                        // move the money by read-modify-write, even ones by get + update.
                        let moved = if n % 2 == 1 {
                            transfer_in_place(&mut tx, &t, from, to, 1)
                        } else {
                            transfer(&mut tx, &t, from, to, 1)
                        };
                        let r = moved.and_then(|_| {
                            if n % 10 == 0 {
                                let rows = tx.scan(
                                    &t,
                                    engine::KeyRange {
                                        low: std::ops::Bound::Unbounded,
                                        high: std::ops::Bound::Unbounded,
                                    },
                                    None,
                                    false,
                                    Fetch::Cols(&[2]),
                                    false,
                                )?;
                                let sum: i64 = rows.iter().map(|r| r[0].as_int().unwrap()).sum();
                                assert_eq!(
                                    sum,
                                    ACCOUNTS * 100,
                                    "a reader saw money appear or vanish"
                                );
                            }
                            Ok(())
                        });
                        match r {
                            Ok(()) => {
                                tx.commit().unwrap();
                                committed.fetch_add(1, Ordering::Relaxed);
                                break;
                            }
                            Err(TxError::Retry(_)) => {
                                tx.abort().unwrap();
                                retries.fetch_add(1, Ordering::Relaxed);
                                std::thread::yield_now();
                            }
                            Err(e) => panic!("unexpected error {e}"),
                        }
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(
        committed.load(Ordering::Relaxed),
        (THREADS * TRANSFERS) as u64
    );
    assert_eq!(
        total(&db, &t),
        ACCOUNTS * 100,
        "money was created or destroyed"
    );
    db.check_invariants().unwrap();
}

#[test]
fn bank_transfers_conserve_money_with_the_full_engine() {
    run_bank(open(Preset::Full, THREADS));
}

#[test]
fn bank_transfers_conserve_money_with_single_switches_off() {
    // Every switch that still allows several threads.
    for sw in [
        Switch::BtreeKeys,
        Switch::DiskLog,
        Switch::MainLog,
        Switch::DirLookup,
        Switch::SmallPage,
        Switch::PageAccess,
        Switch::Xactions,
    ] {
        let mut s = Switches::preset(Preset::Full);
        s.set(sw, false);
        if sw == Switch::MainLog {
            s.set(Switch::DiskLog, false);
        }
        let db = Database::open(DbConfig {
            switches: s,
            threads: THREADS,
            pool_mib: 16,
            ..DbConfig::default()
        })
        .unwrap();
        run_bank(db);
    }
}

#[test]
fn no_lost_update_on_a_hot_counter() {
    let db = open(Preset::Full, THREADS);
    let t = load_accounts(&db, 1);
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let (db, t) = (db.clone(), t.clone());
            std::thread::spawn(move || {
                for _ in 0..200 {
                    loop {
                        let mut tx = db.begin().unwrap();
                        let r = (|| {
                            let v = tx
                                .get(&t, &[Value::Int(0)], Fetch::Cols(&[2]), false)?
                                .unwrap();
                            tx.update(
                                &t,
                                &[Value::Int(0)],
                                &[(2, Value::Int(v[0].as_int().unwrap() + 1))],
                            )?;
                            Ok::<_, TxError>(())
                        })();
                        match r {
                            Ok(()) => {
                                tx.commit().unwrap();
                                break;
                            }
                            Err(TxError::Retry(_)) => tx.abort().unwrap(),
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    // Read-then-upgrade deadlocks are resolved by aborting a victim; none is lost.
    assert_eq!(total(&db, &t), 100 + (THREADS as i64) * 200);
}

#[test]
fn deadlock_victim_is_chosen_and_the_other_finishes() {
    let db = open(Preset::Full, 2);
    let t = load_accounts(&db, 2);
    let barrier = Arc::new(std::sync::Barrier::new(2));
    let outcomes: Vec<_> = [(0, 1), (1, 0)]
        .into_iter()
        .map(|(a, b)| {
            let (db, t, barrier) = (db.clone(), t.clone(), barrier.clone());
            std::thread::spawn(move || {
                let mut tx = db.begin().unwrap();
                tx.update(&t, &[Value::Int(a)], &[(2, Value::Int(1))])
                    .unwrap();
                barrier.wait();
                match tx.update(&t, &[Value::Int(b)], &[(2, Value::Int(2))]) {
                    Ok(_) => {
                        tx.commit().unwrap();
                        true
                    }
                    Err(e) => {
                        assert!(e.is_retryable(), "{e}");
                        tx.abort().unwrap();
                        false
                    }
                }
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .collect();
    assert_eq!(
        outcomes.iter().filter(|ok| **ok).count(),
        1,
        "exactly one victim: {outcomes:?}"
    );
    // The database tells the cycle with the table's name: each waited for X on a record of
    // the other.
    let told = db.last_deadlock().expect("the deadlock is told");
    assert_eq!(
        told.matches(" waits for X on a record of accounts (0x")
            .count(),
        2,
        "{told}"
    );
    assert_eq!(told.matches(" (the victim) ").count(), 1, "{told}");
}

#[test]
fn no_deadlock_is_told_before_one_happens() {
    let db = open(Preset::Full, 2);
    let t = load_accounts(&db, 2);
    db.run(|tx| {
        tx.update(&t, &[Value::Int(0)], &[(2, Value::Int(1))])
            .map(drop)
    })
    .unwrap();
    assert_eq!(db.last_deadlock(), None);
}

#[test]
fn a_scan_blocks_phantom_inserts_until_it_commits() {
    let db = open(Preset::Full, 2);
    let t = load_accounts(&db, 10);
    let mut reader = db.begin().unwrap();
    let lo = [Value::Int(0)];
    let range = || engine::KeyRange {
        low: std::ops::Bound::Included(&lo[..]),
        high: std::ops::Bound::Unbounded,
    };
    let first = reader
        .scan(&t, range(), None, false, Fetch::Cols(&[0]), false)
        .unwrap();
    let inserted = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (db, t, inserted) = (db.clone(), t.clone(), inserted.clone());
        std::thread::spawn(move || {
            db.run(|tx| {
                tx.insert(
                    &t,
                    &[Value::Int(50), Value::Str("late".into()), Value::Int(0)],
                )
            })
            .unwrap();
            inserted.store(true, Ordering::SeqCst);
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(
        !inserted.load(Ordering::SeqCst),
        "the insert went into a range a running scan covers"
    );
    let again = reader
        .scan(&t, range(), None, false, Fetch::Cols(&[0]), false)
        .unwrap();
    assert_eq!(first, again, "phantom row appeared");
    reader.commit().unwrap();
    writer.join().unwrap();
    assert!(inserted.load(Ordering::SeqCst));
}

/// A read of a whole heap table in storage order (`Tx::scan_table_with`) locks the table: no
/// row of it is inserted, updated or deleted until the reader commits, and it reads the
/// rows there are, each once.
#[test]
fn a_scan_in_storage_order_holds_writers_off_the_table_until_it_commits() {
    let db = open(Preset::Full, 2);
    let t = load_accounts(&db, 300);
    db.run(|tx| tx.delete(&t, &[Value::Int(7)]).map(drop))
        .unwrap();
    let mut reader = db.begin().unwrap();
    let mut ids = Vec::new();
    reader
        .scan_table_with(&t, &[0], &mut |r| {
            ids.push(r.int(0)?);
            Ok(())
        })
        .unwrap();
    ids.sort_unstable();
    let expected: Vec<i64> = (0..300).filter(|&id| id != 7).collect();
    assert_eq!(ids, expected, "every row there is, once");

    let written = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (db, t, written) = (db.clone(), t.clone(), written.clone());
        std::thread::spawn(move || {
            // A lock wait that times out is retried until the reader lets go.
            loop {
                let r = db.run(|tx| {
                    tx.update(&t, &[Value::Int(299)], &[(2, Value::Int(0))])
                        .map(drop)
                });
                match r {
                    Ok(()) => break,
                    Err(TxError::Retry(_)) => continue,
                    Err(e) => panic!("{e}"),
                }
            }
            written.store(true, Ordering::SeqCst);
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(
        !written.load(Ordering::SeqCst),
        "a row changed in a table a running scan in storage order read"
    );
    reader.commit().unwrap();
    writer.join().unwrap();
    assert!(written.load(Ordering::SeqCst));
}

#[test]
fn bank_transfers_conserve_money_with_page_locking() {
    let db = Database::open(DbConfig {
        threads: THREADS,
        pool_mib: 16,
        page_locking: true,
        ..DbConfig::default()
    })
    .unwrap();
    run_bank(db);
}

#[test]
fn page_locking_locks_the_whole_page() {
    for page_locking in [false, true] {
        let db = Database::open(DbConfig {
            threads: 2,
            pool_mib: 16,
            page_locking,
            ..DbConfig::default()
        })
        .unwrap();
        let t = load_accounts(&db, 10); // all ten rows share one heap page
        let mut writer = db.begin().unwrap();
        writer
            .update(&t, &[Value::Int(1)], &[(2, Value::Int(7))])
            .unwrap();
        let read = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (db, t, read) = (db.clone(), t.clone(), read.clone());
            std::thread::spawn(move || {
                db.run(|tx| tx.get(&t, &[Value::Int(2)], Fetch::All, false))
                    .unwrap();
                read.store(true, Ordering::SeqCst);
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(200));
        // Record locking lets the reader of another row through; page locking holds it.
        assert_eq!(
            read.load(Ordering::SeqCst),
            !page_locking,
            "page_locking={page_locking}"
        );
        writer.commit().unwrap();
        reader.join().unwrap();
        assert!(read.load(Ordering::SeqCst));
    }
}
