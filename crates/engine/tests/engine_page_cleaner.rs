//! Page cleaners (`DbConfig::page_cleaners`): beside transactions whose data outgrows a small
//! pool, they write back pages the clock is about to take, and the data stays whole through
//! the run, a clean close and an open. (Crashes during their writes: `engine_recovery`'s
//! campaign runs them in every other round.)

mod common;

use std::time::{Duration, Instant};

use common::*;
use engine::{Database, DbConfig};
use rand::{Rng, SeedableRng};

const ACCOUNTS: i64 = 20_000;

#[test]
fn page_cleaners_write_ahead_of_the_clock_and_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = || DbConfig {
        path: Some(dir.path().to_path_buf()),
        // Far smaller than the accounts: every transfer's pages come and go.
        pool_mib: 1,
        threads: 2,
        page_cleaners: 2,
        ..DbConfig::default()
    };
    let db = Database::open(config()).unwrap();
    let t = load_accounts(&db, ACCOUNTS);
    let pool = db.pool().unwrap().clone();
    let before = pool.io();
    // Two threads transfer between random accounts until the cleaners have written pages
    // (they write only what the misses are about to need, so they need a running workload).
    let deadline = Instant::now() + Duration::from_secs(60);
    std::thread::scope(|s| {
        for seed in 0..2u64 {
            let (db, t, pool) = (&db, &t, &pool);
            s.spawn(move || {
                let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
                let mut done = 0;
                while done < 300
                    || (pool.io().since(&before).cleaner_writes < 20 && Instant::now() < deadline)
                {
                    let from = rng.gen_range(0..ACCOUNTS);
                    let to = (from + rng.gen_range(1..ACCOUNTS)) % ACCOUNTS;
                    db.run(|tx| transfer(tx, t, from, to, 1)).unwrap();
                    done += 1;
                }
            });
        }
    });
    let io = pool.io().since(&before);
    // (A round counts its pages when it ends; the pool, as it writes each: a round that was
    // still going when the workload stopped is waited for.)
    let round_end = Instant::now() + Duration::from_secs(10);
    while db.page_cleaner_progress().0 == 0 && Instant::now() < round_end {
        std::thread::sleep(Duration::from_millis(10));
    }
    let (rounds, written) = db.page_cleaner_progress();
    assert!(
        io.cleaner_writes >= 20,
        "the cleaners wrote too little: {io:?}"
    );
    assert!(
        rounds > 0 && written > 0,
        "{rounds} rounds, {written} pages"
    );
    assert!(io.writes >= io.cleaner_writes + io.evict_writes, "{io:?}");
    assert_eq!(total(&db, &t), ACCOUNTS * 100);
    db.check_invariants().unwrap();
    drop(t);
    db.close().unwrap();

    let db = Database::open(config()).unwrap();
    let recovered = db.recovery().unwrap();
    assert_eq!(
        recovered.redone, 0,
        "a clean close leaves nothing to redo: {recovered}"
    );
    let t = db.table("accounts").unwrap();
    assert_eq!(total(&db, &t), ACCOUNTS * 100);
    db.check_invariants().unwrap();
    drop(t);
    db.close().unwrap();
}

/// Without latches a cleaner's write would race the transaction's changes: refused, by name.
#[test]
fn page_cleaners_without_latching_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut switches = engine::Switches::default();
    switches.apply("latching=off").unwrap();
    let err = Database::open(DbConfig {
        path: Some(dir.path().to_path_buf()),
        threads: 1,
        switches,
        page_cleaners: 1,
        ..DbConfig::default()
    })
    .err()
    .expect("opened with cleaners and no latches");
    assert!(err.to_string().contains("page cleaners"), "{err}");
    assert!(err.to_string().contains("latching"), "{err}");
}

/// In memory there is no page file to clean: asking for cleaners starts none.
#[test]
fn a_database_in_memory_starts_no_page_cleaner() {
    let db = Database::open(DbConfig {
        page_cleaners: 2,
        ..DbConfig::default()
    })
    .unwrap();
    let t = load_accounts(&db, 100);
    db.run(|tx| transfer(tx, &t, 1, 2, 5)).unwrap();
    assert_eq!(db.page_cleaner_progress(), (0, 0));
}
