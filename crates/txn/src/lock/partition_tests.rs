//! Tests of coarse-lock partitioning (`LockConfig::coarse_partitions`): intention locks go to
//! one partition, every other table or database mode to all of them, and the two still
//! conflict as one lock would.

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::*;
use LockMode::{IX, S, X};

const PARTS: usize = 4;

fn manager() -> Arc<LockManager> {
    Arc::new(LockManager::new(LockConfig {
        buckets: 64,
        wait_timeout: Duration::from_secs(5),
        coarse_partitions: PARTS,
        ..LockConfig::default()
    }))
}

fn partitions_held(t: &TxnLocks) -> Vec<(LockName, LockMode)> {
    t.held()
        .iter()
        .copied()
        .filter(|(n, _)| matches!(n, LockName::DatabasePart(_) | LockName::TablePart { .. }))
        .collect()
}

#[test]
fn an_intention_lock_takes_one_partition_of_database_and_table() {
    let m = manager();
    let mut t = m.begin(TxnId(1));
    m.lock_record(&mut t, 7, 1, X, WHOLE_GAP).unwrap();
    let parts = partitions_held(&t);
    assert_eq!(
        parts.len(),
        2,
        "one database and one table partition: {parts:?}"
    );
    assert!(matches!(parts[0], (LockName::DatabasePart(p), IX) if (p as usize) < PARTS));
    assert!(
        matches!(parts[1], (LockName::TablePart { table: 7, part }, IX) if (part as usize) < PARTS)
    );
    // The caller sees the whole table's mode, whatever the partition.
    assert_eq!(t.mode_of(LockName::Table(7)), Some(IX));
    assert_eq!(t.mode_of(LockName::Database), Some(IX));
    m.release_all(&mut t);
    assert_eq!(m.lock_name_count(), 0);
}

#[test]
fn a_table_lock_takes_every_partition() {
    let m = manager();
    let mut t = m.begin(TxnId(1));
    m.lock_table(&mut t, 3, S).unwrap();
    let tables: Vec<_> = partitions_held(&t)
        .into_iter()
        .filter(|(n, _)| matches!(n, LockName::TablePart { table: 3, .. }))
        .collect();
    assert_eq!(tables.len(), PARTS, "{tables:?}");
    assert!(tables.iter().all(|(_, m)| *m == S));
    assert_eq!(t.mode_of(LockName::Table(3)), Some(S));
    // Records below are covered: no record lock is taken.
    let before = t.held().len();
    m.lock_record(&mut t, 3, 9, S, WHOLE_GAP).unwrap();
    assert_eq!(t.held().len(), before);
    m.release_all(&mut t);
    assert_eq!(m.lock_name_count(), 0);
}

/// Threads take partitions in the order they first lock; whichever two partitions the
/// writers got, a table `S` must wait for both writers' `IX`.
#[test]
fn a_table_lock_waits_for_intention_locks_on_every_partition() {
    let m = manager();
    let writers: Vec<_> = (0..3u64)
        .map(|i| {
            let m = m.clone();
            let (locked_tx, locked_rx) = std::sync::mpsc::channel();
            let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
            let h = thread::spawn(move || {
                let mut t = m.begin(TxnId(10 + i));
                m.lock_record(&mut t, 5, i, X, WHOLE_GAP).unwrap();
                locked_tx.send(()).unwrap();
                release_rx.recv().unwrap();
                m.release_all(&mut t);
            });
            locked_rx.recv().unwrap();
            (h, release_tx)
        })
        .collect();
    let reader = {
        let m = m.clone();
        thread::spawn(move || {
            let mut t = m.begin(TxnId(99));
            let started = Instant::now();
            m.lock_table(&mut t, 5, S).unwrap();
            let waited = started.elapsed();
            m.release_all(&mut t);
            waited
        })
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while !m.is_waiting(TxnId(99)) {
        assert!(Instant::now() < deadline, "the table S never blocked");
        thread::sleep(Duration::from_millis(1));
    }
    for (h, release) in writers {
        thread::sleep(Duration::from_millis(20));
        // Still blocked while any writer holds its IX.
        assert!(!reader.is_finished());
        release.send(()).unwrap();
        h.join().unwrap();
    }
    let waited = reader.join().unwrap();
    assert!(
        waited >= Duration::from_millis(40),
        "waited only {waited:?}"
    );
    m.check_invariants();
    assert_eq!(m.lock_name_count(), 0);
}

#[test]
fn a_table_x_blocks_a_later_intention_lock_on_any_partition() {
    let m = manager();
    let mut holder = m.begin(TxnId(1));
    m.lock_table(&mut holder, 2, X).unwrap();
    let waiters: Vec<_> = (0..PARTS as u64 + 1)
        .map(|i| {
            let m = m.clone();
            thread::spawn(move || {
                let mut t = m.begin(TxnId(100 + i));
                // Immediately refused, whichever partition this thread has.
                assert!(!m.try_lock_record(&mut t, 2, i, S, WHOLE_GAP).unwrap());
                m.release_all(&mut t);
            })
        })
        .collect();
    for w in waiters {
        w.join().unwrap();
    }
    m.release_all(&mut holder);
    let mut t = m.begin(TxnId(2));
    assert!(m.try_lock_record(&mut t, 2, 0, S, WHOLE_GAP).unwrap());
    m.release_all(&mut t);
    assert_eq!(m.lock_name_count(), 0);
}

#[test]
fn upgrading_an_intention_to_a_table_lock_covers_every_partition() {
    let m = manager();
    let mut t = m.begin(TxnId(1));
    m.lock_record(&mut t, 4, 1, X, WHOLE_GAP).unwrap();
    m.lock_table(&mut t, 4, X).unwrap();
    let tables: Vec<_> = partitions_held(&t)
        .into_iter()
        .filter(|(n, _)| matches!(n, LockName::TablePart { table: 4, .. }))
        .collect();
    assert_eq!(tables.len(), PARTS, "{tables:?}");
    assert!(tables.iter().all(|(_, m)| *m == X), "{tables:?}");
    assert_eq!(t.mode_of(LockName::Table(4)), Some(X));
    m.release_all(&mut t);
    assert_eq!(m.lock_name_count(), 0);
}
