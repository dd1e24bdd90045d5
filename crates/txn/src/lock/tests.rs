//! Tests of the lock manager through its public entry points: hierarchy, upgrades, FIFO,
//! deadlocks with threads, escalation, page-level locking, timeouts, timing, a
//! multi-thread stress run, and a single-thread model test against a `HashMap`.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::mode::ALL_MODES;
use super::*;
use LockMode::{IS, IX, S, SIX, X};

fn config() -> LockConfig {
    LockConfig {
        buckets: 64,
        wait_timeout: Duration::from_secs(5),
        ..LockConfig::default()
    }
}

fn manager(config: LockConfig) -> Arc<LockManager> {
    Arc::new(LockManager::new(config))
}

/// Spins until `txn` is blocked in `m` (or panics after a few seconds).
fn until_waiting(m: &LockManager, txn: TxnId) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !m.is_waiting(txn) {
        assert!(Instant::now() < deadline, "{txn} never blocked");
        thread::sleep(Duration::from_millis(1));
    }
}

fn rec(table: u32, key: u64) -> LockName {
    LockName::Record { table, key }
}

#[test]
fn record_lock_takes_intention_locks_once() {
    let m = manager(config());
    let mut t = m.begin(TxnId(1));
    m.lock_record(&mut t, 7, 1, X, WHOLE_GAP).unwrap();
    assert_eq!(
        t.held(),
        &[
            (LockName::Database, IX),
            (LockName::Table(7), IX),
            (rec(7, 1), X)
        ]
    );
    assert_eq!(t.stats().requests, 3);
    m.lock_record(&mut t, 7, 2, S, WHOLE_GAP).unwrap();
    assert_eq!(
        t.stats().requests,
        4,
        "second record of a table: one request"
    );
    m.lock_record(&mut t, 8, 1, S, WHOLE_GAP).unwrap();
    assert_eq!(t.mode_of(LockName::Table(8)), Some(IS));
    assert_eq!(
        t.stats().requests,
        6,
        "new table: table IS + record (database IX covers IS)"
    );
    assert_eq!(t.leaf_locks_in(7), 2);
    m.check_invariants();
    m.release_all(&mut t);
    assert!(t.is_empty());
    assert_eq!(m.lock_name_count(), 0);
    let stats = m.stats();
    assert_eq!((stats.requests, stats.immediate, stats.waits), (6, 6, 0));
    m.check_invariants();
}

#[test]
fn read_then_write_upgrades_intentions_in_place() {
    let m = manager(config());
    let mut t = m.begin(TxnId(1));
    m.lock_record(&mut t, 1, 5, S, WHOLE_GAP).unwrap();
    assert_eq!(t.mode_of(LockName::Table(1)), Some(IS));
    m.lock_record(&mut t, 1, 5, X, WHOLE_GAP).unwrap();
    assert_eq!(t.mode_of(rec(1, 5)), Some(X));
    assert_eq!(t.mode_of(LockName::Table(1)), Some(IX));
    assert_eq!(t.mode_of(LockName::Database), Some(IX));
    assert_eq!(
        t.held().len(),
        3,
        "upgrades convert in place, no second entry"
    );
    // Table S on top of IX: SIX.
    m.lock_table(&mut t, 1, S).unwrap();
    assert_eq!(t.mode_of(LockName::Table(1)), Some(SIX));
    // Re-requesting held or covered modes costs no queueing and no upgrade.
    let upgrades = t.stats().upgrades;
    m.lock_record(&mut t, 1, 5, S, WHOLE_GAP).unwrap();
    m.lock(&mut t, rec(1, 5), X).unwrap();
    assert_eq!(t.stats().upgrades, upgrades);
    assert_eq!(t.stats().waits, 0);
    m.release_all(&mut t);
    let stats = m.stats();
    assert_eq!(
        stats.upgrades, 4,
        "record S→X, table IS→IX, database IS→IX, table IX→SIX"
    );
    m.check_invariants();
}

#[test]
fn table_lock_covers_records_below_it() {
    let m = manager(config());
    let mut t = m.begin(TxnId(1));
    m.lock_table(&mut t, 2, X).unwrap();
    let requests = t.stats().requests;
    m.lock_record(&mut t, 2, 1, X, WHOLE_GAP).unwrap();
    m.lock_page(&mut t, 2, 1, S).unwrap();
    assert_eq!(t.stats().requests, requests, "covered by the table X");
    assert_eq!(t.held().len(), 2, "database IX and table X only");
    m.release_all(&mut t);
}

#[test]
fn upgrade_waits_for_other_readers_and_goes_ahead_of_new_requests() {
    let m = manager(config());
    let (mut t1, mut t2) = (m.begin(TxnId(1)), m.begin(TxnId(2)));
    m.lock(&mut t1, rec(1, 1), S).unwrap();
    m.lock(&mut t2, rec(1, 1), S).unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));

    let (m3, o3) = (m.clone(), order.clone());
    let writer = thread::spawn(move || {
        let mut t3 = m3.begin(TxnId(3));
        m3.lock(&mut t3, rec(1, 1), X).unwrap();
        o3.lock().push(3);
        m3.release_all(&mut t3);
    });
    until_waiting(&m, TxnId(3));

    let (m1, o1) = (m.clone(), order.clone());
    let upgrader = thread::spawn(move || {
        m1.lock(&mut t1, rec(1, 1), X).unwrap();
        assert_eq!(t1.mode_of(rec(1, 1)), Some(X));
        o1.lock().push(1);
        m1.release_all(&mut t1);
    });
    until_waiting(&m, TxnId(1));
    m.check_invariants();
    thread::sleep(Duration::from_millis(20));
    assert!(order.lock().is_empty(), "both wait while T2 reads");
    m.release_all(&mut t2);
    upgrader.join().unwrap();
    writer.join().unwrap();
    assert_eq!(
        *order.lock(),
        vec![1, 3],
        "the upgrade went ahead of the queued X"
    );
    m.check_invariants();
    assert_eq!(m.lock_name_count(), 0);
}

#[test]
fn compatible_request_waits_behind_an_incompatible_waiter() {
    let m = manager(config());
    let mut t1 = m.begin(TxnId(1));
    m.lock(&mut t1, rec(1, 1), S).unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));

    let (m2, o2) = (m.clone(), order.clone());
    let writer = thread::spawn(move || {
        let mut t2 = m2.begin(TxnId(2));
        m2.lock(&mut t2, rec(1, 1), X).unwrap();
        o2.lock().push(2);
        thread::sleep(Duration::from_millis(20));
        o2.lock().push(-2);
        m2.release_all(&mut t2);
    });
    until_waiting(&m, TxnId(2));

    let (m3, o3) = (m.clone(), order.clone());
    let reader = thread::spawn(move || {
        let mut t3 = m3.begin(TxnId(3));
        // Compatible with the granted S, but T2 waits ahead: no barging.
        m3.lock(&mut t3, rec(1, 1), S).unwrap();
        o3.lock().push(3);
        m3.release_all(&mut t3);
    });
    until_waiting(&m, TxnId(3));
    m.check_invariants();
    m.release_all(&mut t1);
    writer.join().unwrap();
    reader.join().unwrap();
    assert_eq!(*order.lock(), vec![2, -2, 3]);
    let stats = m.stats();
    assert_eq!(stats.waits, 2);
    m.check_invariants();
}

/// Runs a cycle of `n` transactions: each first locks its own record, then (all at once)
/// the next one's. Returns the victims.
fn run_cycle(m: &Arc<LockManager>, n: u64, round: u64) -> Vec<TxnId> {
    let barrier = Arc::new(Barrier::new(n as usize));
    let victims = Arc::new(Mutex::new(Vec::new()));
    let finished = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..n)
        .map(|i| {
            let (m, barrier, victims, finished) = (
                m.clone(),
                barrier.clone(),
                victims.clone(),
                finished.clone(),
            );
            thread::spawn(move || {
                let txn = TxnId(round * 100 + i);
                let mut t = m.begin(txn);
                m.lock_record(&mut t, 1, i, X, WHOLE_GAP).unwrap();
                barrier.wait();
                match m.lock_record(&mut t, 1, (i + 1) % n, X, WHOLE_GAP) {
                    Ok(()) => {
                        finished.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(e) => {
                        assert_eq!(e, LockError::Deadlock { victim: txn });
                        assert!(e.is_retryable());
                        // The victim keeps its other locks until it aborts.
                        assert_eq!(t.mode_of(rec(1, i)), Some(X));
                        assert_eq!(t.mode_of(rec(1, (i + 1) % n)), None);
                        victims.lock().push(txn);
                    }
                }
                m.release_all(&mut t);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(
        finished.load(Ordering::SeqCst) + victims.lock().len(),
        n as usize
    );
    let v = victims.lock().clone();
    v
}

#[test]
fn two_and_three_transaction_cycles_have_exactly_one_victim() {
    // No periodic search: every deadlock must be found when the request that closes it blocks.
    let m = manager(LockConfig {
        deadlock_check_interval: Duration::from_secs(5),
        ..config()
    });
    for round in 0..10 {
        for n in [2, 3] {
            let victims = run_cycle(&m, n, round * 10 + n);
            assert_eq!(victims.len(), 1, "cycle of {n}, round {round}: {victims:?}");
            m.check_invariants();
            assert_eq!(m.lock_name_count(), 0);
        }
    }
    let stats = m.stats();
    assert_eq!(stats.deadlocks, 20);
    assert_eq!(stats.timeouts, 0);
}

#[test]
fn conversion_deadlock_of_two_readers_has_one_victim() {
    let m = manager(config());
    let barrier = Arc::new(Barrier::new(2));
    let threads: Vec<_> = (1..=2)
        .map(|i| {
            let (m, barrier) = (m.clone(), barrier.clone());
            thread::spawn(move || {
                let mut t = m.begin(TxnId(i));
                m.lock(&mut t, rec(1, 1), S).unwrap();
                barrier.wait();
                let r = m.lock(&mut t, rec(1, 1), X);
                m.release_all(&mut t);
                r.is_err()
            })
        })
        .collect();
    let victims = threads
        .into_iter()
        .map(|t| t.join().unwrap())
        .filter(|v| *v)
        .count();
    assert_eq!(victims, 1);
    m.check_invariants();
}

#[test]
fn escalation_at_the_threshold_replaces_record_locks() {
    let m = manager(LockConfig {
        escalation_threshold: 4,
        wait_timeout: Duration::from_millis(30),
        ..config()
    });
    let mut t = m.begin(TxnId(1));
    for key in 0..4 {
        m.lock_record(&mut t, 3, key, S, WHOLE_GAP).unwrap();
    }
    assert_eq!(t.leaf_locks_in(3), 4);
    assert!(!t.is_escalated(3));
    m.lock_record(&mut t, 3, 4, S, WHOLE_GAP).unwrap();
    assert!(t.is_escalated(3));
    assert_eq!(t.leaf_locks_in(3), 0);
    assert_eq!(
        t.held(),
        &[(LockName::Database, IS), (LockName::Table(3), S)],
        "record locks gone, one table S"
    );
    // Records of the table are now covered: no further request.
    let requests = t.stats().requests;
    m.lock_record(&mut t, 3, 99, S, WHOLE_GAP).unwrap();
    assert_eq!(t.stats().requests, requests);
    // Others may read but not write the table.
    let mut other = m.begin(TxnId(2));
    m.lock_record(&mut other, 3, 50, S, WHOLE_GAP).unwrap();
    let err = m.lock_record(&mut other, 3, 51, X, WHOLE_GAP).unwrap_err();
    assert!(matches!(err, LockError::Timeout { txn: TxnId(2), .. }));
    m.release_all(&mut other);
    // A write in an S-escalated table converts the table lock to X.
    m.lock_record(&mut t, 3, 7, X, WHOLE_GAP).unwrap();
    assert_eq!(t.mode_of(LockName::Table(3)), Some(X));
    m.check_invariants();
    m.release_all(&mut t);
    assert_eq!(m.stats().escalations, 1);
    assert_eq!(m.lock_name_count(), 0);
}

#[test]
fn escalation_with_writes_takes_table_x() {
    let m = manager(LockConfig {
        escalation_threshold: 3,
        ..config()
    });
    let mut t = m.begin(TxnId(1));
    m.lock_record(&mut t, 1, 0, X, WHOLE_GAP).unwrap();
    m.lock_record(&mut t, 1, 1, S, WHOLE_GAP).unwrap();
    m.lock_record(&mut t, 1, 2, S, WHOLE_GAP).unwrap();
    m.lock_record(&mut t, 1, 3, S, WHOLE_GAP).unwrap();
    assert_eq!(t.mode_of(LockName::Table(1)), Some(X));
    assert_eq!(t.held().len(), 2);
    m.release_all(&mut t);
}

#[test]
fn page_level_locking_uses_the_same_hierarchy() {
    let m = manager(LockConfig {
        page_level: true,
        escalation_threshold: 2,
        ..config()
    });
    let mut t = m.begin(TxnId(1));
    m.lock_page(&mut t, 4, 10, X).unwrap();
    assert_eq!(
        t.held(),
        &[
            (LockName::Database, IX),
            (LockName::Table(4), IX),
            (LockName::Page { table: 4, page: 10 }, X)
        ]
    );
    m.lock_page(&mut t, 4, 11, S).unwrap();
    m.lock_page(&mut t, 4, 12, S).unwrap();
    assert!(
        t.is_escalated(4),
        "pages count toward escalation like records"
    );
    assert_eq!(t.mode_of(LockName::Table(4)), Some(X));
    m.release_all(&mut t);
    m.check_invariants();
}

#[test]
fn timeout_withdraws_only_the_waiting_request() {
    let m = manager(LockConfig {
        wait_timeout: Duration::from_millis(30),
        ..config()
    });
    let (mut t1, mut t2) = (m.begin(TxnId(1)), m.begin(TxnId(2)));
    m.lock_record(&mut t1, 1, 1, X, WHOLE_GAP).unwrap();
    m.lock_record(&mut t2, 1, 2, X, WHOLE_GAP).unwrap();
    let started = Instant::now();
    let err = m.lock_record(&mut t2, 1, 1, S, WHOLE_GAP).unwrap_err();
    assert!(started.elapsed() >= Duration::from_millis(30));
    assert_eq!(
        err,
        LockError::Timeout {
            txn: TxnId(2),
            name: rec(1, 1)
        }
    );
    assert!(err.is_retryable());
    assert_eq!(err.txn(), TxnId(2));
    assert_eq!(t2.mode_of(rec(1, 2)), Some(X), "other locks kept");
    m.check_invariants();
    m.release_all(&mut t2);
    m.release_all(&mut t1);
    assert_eq!(m.stats().timeouts, 1);
    assert_eq!(m.lock_name_count(), 0);
}

/// One transaction holds a record for ~20 ms while another waits for it.
fn contended_pair(m: &Arc<LockManager>) {
    let mut t1 = m.begin(TxnId(1));
    m.lock_record(&mut t1, 1, 1, X, WHOLE_GAP).unwrap();
    let m2 = m.clone();
    let waiter = thread::spawn(move || {
        let mut t2 = m2.begin(TxnId(2));
        m2.lock_record(&mut t2, 1, 1, X, WHOLE_GAP).unwrap();
        m2.release_all(&mut t2);
    });
    until_waiting(m, TxnId(2));
    thread::sleep(Duration::from_millis(20));
    m.release_all(&mut t1);
    waiter.join().unwrap();
}

#[test]
fn timing_splits_lock_and_logical_contention_only_when_on() {
    let off = manager(config());
    contended_pair(&off);
    let s = off.stats();
    assert_eq!(s.waits, 1);
    assert_eq!(
        (s.lock_ns, s.physical_contention_ns, s.logical_contention_ns),
        (0, 0, 0)
    );

    let on = manager(LockConfig {
        timing: true,
        ..config()
    });
    contended_pair(&on);
    let s = on.stats();
    assert_eq!(s.waits, 1);
    assert!(s.lock_ns > 0);
    assert!(
        s.logical_contention_ns >= 15_000_000,
        "waited ~20 ms, counted {} ns",
        s.logical_contention_ns
    );
    assert!(
        s.lock_ns < s.logical_contention_ns,
        "waiting is not Lock time"
    );
    on.reset_stats();
    assert_eq!(on.stats(), LockStats::default());
}

#[test]
fn a_sleeping_wait_is_counted_with_its_wake_up_latency() {
    let m = manager(config());
    contended_pair(&m);
    let s = m.stats();
    assert_eq!(s.waits, 1);
    assert_eq!((s.waits_ended_spinning, s.waits_ended_sleeping), (0, 1));
    assert!(
        s.wait_ns >= 15_000_000,
        "waited ~20 ms, counted {} ns",
        s.wait_ns
    );
    assert!(
        s.wake_ns > 0,
        "a woken thread cannot run at its grant's instant"
    );
    assert!(s.wake_ns < s.wait_ns, "the wake-up is part of the wait");
    assert_eq!(
        s.wake_ns_max, s.wake_ns,
        "one wait: its latency is the largest"
    );
    assert_eq!(s.wake_histogram.iter().sum::<u64>(), 1);
    assert_eq!(s.wake_ns_mean(), s.wake_ns);
}

#[test]
fn a_spinning_wait_ends_spinning_and_the_maximum_is_a_maximum() {
    let m = manager(LockConfig {
        spin_wait: Duration::from_secs(5),
        ..config()
    });
    contended_pair(&m);
    contended_pair(&m);
    let s = m.stats();
    assert_eq!((s.waits_ended_spinning, s.waits_ended_sleeping), (2, 0));
    assert!(s.wake_ns_max > 0 && s.wake_ns_max <= s.wake_ns);
    assert!(
        s.wake_ns_max < s.wake_ns,
        "two waits: the max is not their sum"
    );
    assert_eq!(s.wake_histogram.iter().sum::<u64>(), 2);
}

#[test]
fn wake_quantiles_come_from_the_histogram() {
    let mut s = LockStats::default();
    assert_eq!(s.wake_ns_quantile(0.5), 0, "no waits, no latency");
    // 8 waits under 256 ns, 1 in 1–2 µs, 1 in the last bucket.
    s.wake_histogram[0] = 8;
    s.wake_histogram[3] = 1;
    s.wake_histogram[manager::WAKE_BUCKETS - 1] = 1;
    s.wake_ns_max = 9_000_000;
    assert_eq!(s.wake_ns_quantile(0.5), 256);
    assert_eq!(s.wake_ns_quantile(0.8), 256);
    assert_eq!(s.wake_ns_quantile(0.9), 2048);
    assert_eq!(s.wake_ns_quantile(0.99), 9_000_000);
    assert_eq!(s.wake_ns_quantile(1.0), 9_000_000);
}

#[test]
fn latching_off_works_on_one_thread() {
    let m = LockManager::new(LockConfig {
        latching: false,
        ..config()
    });
    let mut t = m.begin(TxnId(1));
    for key in 0..100 {
        m.lock_record(&mut t, 1, key, X, WHOLE_GAP).unwrap();
    }
    m.release_all(&mut t);
    t.reset(TxnId(2));
    m.lock_record(&mut t, 1, 1, S, WHOLE_GAP).unwrap();
    m.release_all(&mut t);
    m.check_invariants();
    assert_eq!(m.lock_name_count(), 0);
}

/// Who holds what on a record, as observed by the stress test's transactions.
#[derive(Default)]
struct Holders {
    readers: HashSet<TxnId>,
    writer: Option<TxnId>,
}

#[test]
fn stress_random_locks_keep_mutual_exclusion_and_end_empty() {
    stress(LockConfig {
        deadlock_check_interval: Duration::from_millis(5),
        ..config()
    });
}

#[test]
fn stress_with_partitioned_table_locks_keeps_mutual_exclusion() {
    stress(LockConfig {
        deadlock_check_interval: Duration::from_millis(5),
        coarse_partitions: 4,
        ..config()
    });
}

#[test]
fn stress_with_spinning_waiters_keeps_mutual_exclusion_and_finds_every_deadlock() {
    // (How many waits end spinning depends on the machine's load: not asserted.)
    stress(LockConfig {
        spin_wait: Duration::from_micros(200),
        deadlock_check_interval: Duration::from_millis(5),
        ..config()
    });
}

#[test]
fn stress_with_thread_bound_transactions_keeps_mutual_exclusion_and_refuses_nothing_more() {
    // One transaction per thread at a time, as the stress runs them: binding them to their
    // threads must neither refuse a request (`SameThread`: the stress accepts deadlock
    // victims only) nor let a deadlock go unfound (no periodic search, no timeout).
    stress(LockConfig {
        thread_bound: true,
        deadlock_check_interval: Duration::from_secs(100),
        ..config()
    });
}

#[test]
fn every_deadlock_is_found_without_the_periodic_search() {
    // The periodic search would come only after 100 s, and a wait times out after 5 s: a
    // deadlock that registration missed would show as a timeout.
    for spin_wait in [Duration::ZERO, Duration::from_micros(300)] {
        stress(LockConfig {
            spin_wait,
            deadlock_check_interval: Duration::from_secs(100),
            ..config()
        });
    }
}

/// Eight threads lock random records and tables of a small name space, with escalation and
/// deadlocks; every grant is checked against a record of who holds what, and every wait
/// must end granted or as a deadlock victim (no timeout). Returns the lock manager's
/// statistics.
fn stress(config: LockConfig) -> LockStats {
    const THREADS: u64 = 8;
    const TXNS: u64 = 150;
    const TABLES: u32 = 3;
    const KEYS: u64 = 24;
    let m = manager(LockConfig {
        escalation_threshold: 3,
        ..config
    });
    let cells: Arc<Vec<Mutex<Holders>>> = Arc::new(
        (0..TABLES as u64 * KEYS)
            .map(|_| Mutex::new(Holders::default()))
            .collect(),
    );
    let commits = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..THREADS)
        .map(|thread_no| {
            let (m, cells, commits) = (m.clone(), cells.clone(), commits.clone());
            thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(thread_no);
                let mut t = m.begin(TxnId(thread_no));
                let mut touched = Vec::new();
                for n in 0..TXNS {
                    t.reset(TxnId(n * THREADS + thread_no + 1));
                    let me = t.txn();
                    let ops = rng.gen_range(1..10);
                    let mut aborted = false;
                    for _ in 0..ops {
                        let table = rng.gen_range(0..TABLES);
                        let r = if rng.gen_ratio(1, 20) {
                            let mode = [IS, IX, S][rng.gen_range(0..3)];
                            m.lock_table(&mut t, table, mode)
                        } else {
                            let key = rng.gen_range(0..KEYS);
                            let mode = if rng.gen_bool(0.4) { X } else { S };
                            m.lock_record(&mut t, table, key, mode, WHOLE_GAP)
                                .map(|()| {
                                    let cell_no = (table as u64 * KEYS + key) as usize;
                                    let mut cell = cells[cell_no].lock();
                                    let others_read = cell.readers.iter().any(|r| *r != me);
                                    assert!(cell.writer.is_none_or(|w| w == me), "{me}: written");
                                    if mode == X {
                                        assert!(!others_read, "{me} writes a record others read");
                                        cell.writer = Some(me);
                                    } else {
                                        cell.readers.insert(me);
                                    }
                                    touched.push(cell_no);
                                })
                        };
                        if let Err(e) = r {
                            assert!(matches!(e, LockError::Deadlock { victim } if victim == me));
                            aborted = true;
                            break;
                        }
                        if rng.gen_ratio(1, 4) {
                            thread::yield_now();
                        }
                    }
                    for cell_no in touched.drain(..) {
                        let mut cell = cells[cell_no].lock();
                        cell.readers.remove(&me);
                        if cell.writer == Some(me) {
                            cell.writer = None;
                        }
                    }
                    m.release_all(&mut t);
                    if !aborted {
                        commits.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    m.check_invariants();
    assert_eq!(m.lock_name_count(), 0, "every lock released");
    let stats = m.stats();
    assert_eq!(stats.timeouts, 0, "deadlocks are detected, never timed out");
    assert_eq!(
        commits.load(Ordering::Relaxed) as u64 + stats.deadlocks,
        THREADS * TXNS
    );
    assert_eq!(stats.requests, stats.immediate + stats.waits);
    assert_eq!(
        stats.waits,
        stats.waits_granted() + stats.deadlocks + stats.timeouts,
        "every wait ends granted, as a victim, or timed out"
    );
    assert_eq!(
        stats.wake_histogram.iter().sum::<u64>(),
        stats.waits_granted()
    );
    assert!(stats.escalations > 0, "escalation exercised");
    stats
}

/// A single-thread operation for the model test. With a zero wait timeout a request that
/// would block fails at once, so the model needs no queue.
#[derive(Clone, Debug)]
enum Op {
    Lock { txn: u64, name: u8, mode: LockMode },
    Release { txn: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..4u64, 0..6u8, 0..5usize).prop_map(|(txn, name, m)| Op::Lock {
            txn,
            name,
            mode: ALL_MODES[m]
        }),
        1 => (0..4u64).prop_map(|txn| Op::Release { txn }),
    ]
}

fn model_name(n: u8) -> LockName {
    match n {
        0 => LockName::Database,
        1 | 2 => LockName::Table(n as u32),
        k => rec(1, k as u64),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn raw_locks_follow_the_compatibility_model(ops in proptest::collection::vec(op(), 1..60)) {
        let m = LockManager::new(LockConfig {
            wait_timeout: Duration::ZERO,
            ..config()
        });
        let mut txns: Vec<TxnLocks> = (0..4).map(|i| m.begin(TxnId(i))).collect();
        let mut model: HashMap<LockName, HashMap<u64, LockMode>> = HashMap::new();
        for op in ops {
            match op {
                Op::Lock { txn, name, mode } => {
                    let name = model_name(name);
                    let holders = model.entry(name).or_default();
                    let want = holders.get(&txn).map_or(mode, |h| h.supremum(mode));
                    let grantable = holders
                        .iter()
                        .all(|(other, held)| *other == txn || held.compatible(want));
                    let got = m.lock(&mut txns[txn as usize], name, mode);
                    prop_assert_eq!(got.is_ok(), grantable, "{:?} {} {}", name, txn, mode);
                    if grantable {
                        holders.insert(txn, want);
                    } else {
                        prop_assert!(
                            matches!(got, Err(LockError::Timeout { .. })),
                            "nobody waits, so no deadlock"
                        );
                    }
                }
                Op::Release { txn } => {
                    m.release_all(&mut txns[txn as usize]);
                    for holders in model.values_mut() {
                        holders.remove(&txn);
                    }
                }
            }
            m.check_invariants();
            for (i, t) in txns.iter().enumerate() {
                let mut held: Vec<_> = t.held().to_vec();
                held.sort();
                let mut expected: Vec<_> = model
                    .iter()
                    .filter_map(|(n, h)| h.get(&(i as u64)).map(|m| (*n, *m)))
                    .collect();
                expected.sort();
                prop_assert_eq!(held, expected);
            }
        }
        for t in &mut txns {
            m.release_all(t);
        }
        prop_assert_eq!(m.lock_name_count(), 0);
    }
}

// ---- conditional requests (try_lock_record) ----

#[test]
fn try_lock_grants_like_lock_record_when_free() {
    let m = manager(config());
    let mut t = m.begin(TxnId(1));
    assert!(m.try_lock_record(&mut t, 7, 1, X, WHOLE_GAP).unwrap());
    assert_eq!(
        t.held(),
        &[
            (LockName::Database, IX),
            (LockName::Table(7), IX),
            (rec(7, 1), X)
        ]
    );
    assert_eq!(t.leaf_locks_in(7), 1);
    // Held already: granted again without a new lock.
    assert!(m.try_lock_record(&mut t, 7, 1, S, WHOLE_GAP).unwrap());
    assert_eq!(t.held().len(), 3);
    m.check_invariants();
    m.release_all(&mut t);
    assert_eq!(m.lock_name_count(), 0);
    let stats = m.stats();
    assert_eq!(stats.requests, stats.immediate + stats.waits);
}

#[test]
fn try_lock_refuses_a_conflict_without_queueing_or_leaving_state() {
    let m = manager(config());
    let mut holder = m.begin(TxnId(1));
    m.lock_record(&mut holder, 3, 9, X, WHOLE_GAP).unwrap();
    let mut t = m.begin(TxnId(2));
    m.lock_record(&mut t, 3, 1, X, WHOLE_GAP).unwrap();
    let names_before = m.lock_name_count();
    assert!(!m.try_lock_record(&mut t, 3, 9, X, WHOLE_GAP).unwrap());
    assert!(!m.try_lock_record(&mut t, 3, 9, S, WHOLE_GAP).unwrap());
    assert_eq!(t.mode_of(rec(3, 9)), None);
    assert_eq!(t.leaf_locks_in(3), 1);
    assert!(!m.is_waiting(TxnId(2)));
    assert_eq!(m.lock_name_count(), names_before);
    m.check_invariants();
    // Once the holder is gone the same request is granted.
    m.release_all(&mut holder);
    assert!(m.try_lock_record(&mut t, 3, 9, X, WHOLE_GAP).unwrap());
    assert_eq!(t.mode_of(rec(3, 9)), Some(X));
    m.release_all(&mut t);
    assert_eq!(m.lock_name_count(), 0);
    let stats = m.stats();
    assert_eq!((stats.waits, stats.requests), (0, stats.immediate));
    assert_eq!(
        stats.refused, 2,
        "the two refused conditional requests are counted"
    );
    m.check_invariants();
}

#[test]
fn an_instant_request_says_whether_it_would_be_granted_and_keeps_nothing() {
    let m = manager(config());
    let mut t = m.begin(TxnId(1));
    // Free: granted, and no record lock is left behind (the intentions above are kept).
    assert!(m
        .try_lock_record_instant(&mut t, 7, 1, X, u64::MAX)
        .unwrap());
    assert_eq!(
        t.held(),
        &[(LockName::Database, IX), (LockName::Table(7), IX)]
    );
    assert_eq!(t.leaf_locks_in(7), 0);
    assert_eq!(
        m.lock_name_count(),
        2,
        "the database and the table, no record"
    );
    // Another transaction may take it exclusively at once.
    let mut other = m.begin(TxnId(2));
    assert!(m.try_lock_record(&mut other, 7, 1, X, WHOLE_GAP).unwrap());
    // Now held by someone else: refused, nothing queued, nothing held.
    assert!(!m
        .try_lock_record_instant(&mut t, 7, 1, X, u64::MAX)
        .unwrap());
    assert!(!m
        .try_lock_record_instant(&mut t, 7, 1, S, u64::MAX)
        .unwrap());
    assert!(!m.is_waiting(TxnId(1)));
    assert_eq!(t.mode_of(rec(7, 1)), None);
    m.release_all(&mut other);
    // Shared holders refuse an exclusive instant and admit a shared one.
    m.lock_record(&mut other, 7, 1, S, WHOLE_GAP).unwrap();
    assert!(!m
        .try_lock_record_instant(&mut t, 7, 1, X, u64::MAX)
        .unwrap());
    assert!(m
        .try_lock_record_instant(&mut t, 7, 1, S, u64::MAX)
        .unwrap());
    m.release_all(&mut other);
    // Its own lock never refuses it, and stays as it was.
    m.lock_record(&mut t, 7, 2, S, WHOLE_GAP).unwrap();
    assert!(m
        .try_lock_record_instant(&mut t, 7, 2, X, u64::MAX)
        .unwrap());
    assert_eq!(t.mode_of(rec(7, 2)), Some(S));
    m.check_invariants();
    m.release_all(&mut t);
    assert_eq!(m.lock_name_count(), 0);
    let stats = m.stats();
    assert_eq!(stats.requests, stats.immediate + stats.waits);
    assert_eq!(stats.refused, 3);
}

/// Whether `inserter` may insert a key ranked `rank` into the gap below record 9 of table 4
/// now (the instant check of the key after it).
fn admits(m: &LockManager, inserter: &mut TxnLocks, rank: u64) -> bool {
    m.try_lock_record_instant(inserter, 4, 9, X, rank).unwrap()
}

#[test]
fn an_instant_insert_check_passes_holders_whose_floor_lies_above_the_inserted_key() {
    let m = manager(config());
    let (mut holder, mut inserter) = (m.begin(TxnId(1)), m.begin(TxnId(2)));
    // The holder guards the gap below record 9 from rank 100 up (a scan that started at
    // 100, say).
    m.lock_record(&mut holder, 4, 9, X, 100).unwrap();
    // An insert of a key ranked below 100 lands in a part of the gap nobody guards; one
    // ranked 100 or more is refused, as is one whose rank says nothing (`u64::MAX`).
    assert!(admits(&m, &mut inserter, 99));
    assert!(!admits(&m, &mut inserter, 100));
    assert!(!admits(&m, &mut inserter, u64::MAX));
    // Floors change instant inserts only: a request for the record itself still waits.
    assert!(!m.try_lock_record(&mut inserter, 4, 9, S, 0).unwrap());
    // Asked for again with a lower floor (the same transaction's scan from 50), the grant
    // keeps the lower one, though its mode already covered the request.
    m.lock_record(&mut holder, 4, 9, S, 50).unwrap();
    assert!(admits(&m, &mut inserter, 49));
    assert!(!admits(&m, &mut inserter, 60));
    // Two holders: the one guarding the whole gap refuses every insert, until it is gone.
    m.release_all(&mut holder);
    let mut reader = m.begin(TxnId(3));
    m.lock_record(&mut reader, 4, 9, S, WHOLE_GAP).unwrap();
    m.lock_record(&mut holder, 4, 9, S, 200).unwrap();
    assert!(!admits(&m, &mut inserter, 150));
    m.release_all(&mut reader);
    assert!(admits(&m, &mut inserter, 150));
    // An upgrade asked with a higher floor keeps the lower of the two.
    m.lock_record(&mut holder, 4, 9, X, 300).unwrap();
    assert!(!admits(&m, &mut inserter, 250));
    m.check_invariants();
    m.release_all(&mut holder);
    m.release_all(&mut inserter);
    m.release_all(&mut reader);
    assert_eq!(m.lock_name_count(), 0);
}

#[test]
fn a_granted_waiter_keeps_the_floor_it_asked_with() {
    let m = manager(config());
    let (mut first, mut second, mut inserter) =
        (m.begin(TxnId(1)), m.begin(TxnId(2)), m.begin(TxnId(3)));
    m.lock_record(&mut first, 4, 9, X, WHOLE_GAP).unwrap();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| m.lock_record(&mut second, 4, 9, X, 100));
        while !m.is_waiting(TxnId(2)) {
            std::thread::yield_now();
        }
        m.release_all(&mut first);
        waiter.join().unwrap().unwrap();
    });
    assert!(admits(&m, &mut inserter, 99));
    assert!(!admits(&m, &mut inserter, 100));
    m.check_invariants();
    m.release_all(&mut second);
    m.release_all(&mut inserter);
}

#[test]
fn releasing_one_record_grants_its_waiter_and_keeps_the_rest() {
    let m = manager(config());
    let (mut holder, mut waiter) = (m.begin(TxnId(1)), m.begin(TxnId(2)));
    m.lock_record(&mut holder, 4, 9, X, WHOLE_GAP).unwrap();
    m.lock_record(&mut holder, 4, 10, S, WHOLE_GAP).unwrap();
    m.lock_record(&mut holder, 5, 9, X, WHOLE_GAP).unwrap();
    std::thread::scope(|s| {
        let waiting = s.spawn(|| m.lock_record(&mut waiter, 4, 9, S, WHOLE_GAP));
        until_waiting(&m, TxnId(2));
        assert!(m.release_record(&mut holder, 4, 9));
        waiting.join().unwrap().unwrap();
    });
    assert_eq!(waiter.mode_of(rec(4, 9)), Some(S));
    // Only that record went: the same key in another table and the table's other record
    // stay held, and the table counts one leaf lock fewer.
    assert_eq!(holder.mode_of(rec(4, 9)), None);
    assert_eq!(holder.mode_of(rec(4, 10)), Some(S));
    assert_eq!(holder.mode_of(rec(5, 9)), Some(X));
    assert_eq!(holder.leaf_locks_in(4), 1);
    assert!(!m.try_lock_record(&mut waiter, 4, 10, X, WHOLE_GAP).unwrap());
    // A record not held is not released twice.
    assert!(!m.release_record(&mut holder, 4, 9));
    m.check_invariants();
    m.release_all(&mut holder);
    m.release_all(&mut waiter);
    assert_eq!(m.lock_name_count(), 0);
    m.check_invariants();
}

#[test]
fn releasing_the_shared_leaves_since_a_mark_keeps_older_and_exclusive_locks() {
    let m = manager(config());
    let (mut reader, mut writer) = (m.begin(TxnId(1)), m.begin(TxnId(2)));
    m.lock_record(&mut reader, 4, 1, S, WHOLE_GAP).unwrap();
    let mark = reader.held().len();
    m.lock_record(&mut reader, 4, 2, S, WHOLE_GAP).unwrap();
    m.lock_record(&mut reader, 4, 3, X, WHOLE_GAP).unwrap();
    m.lock_record(&mut reader, 6, 1, S, WHOLE_GAP).unwrap();
    // A page lock (page-level locking, on a table of its own) is a leaf as a record's is.
    m.lock_page(&mut reader, 8, 5, S).unwrap();
    // Re-asked after the mark, a lock held before it is not new.
    m.lock_record(&mut reader, 4, 1, S, WHOLE_GAP).unwrap();
    assert_eq!(reader.leaf_locks_in(8), 1);
    assert_eq!(m.release_shared_leaves_from(&mut reader, mark), 3);
    assert_eq!(reader.mode_of(rec(4, 1)), Some(S));
    assert_eq!(reader.mode_of(rec(4, 2)), None);
    assert_eq!(reader.mode_of(rec(4, 3)), Some(X));
    assert_eq!(reader.mode_of(rec(6, 1)), None);
    assert_eq!(reader.mode_of(LockName::Table(6)), Some(IS));
    assert_eq!(reader.mode_of(LockName::Page { table: 8, page: 5 }), None);
    assert_eq!(
        (
            reader.leaf_locks_in(4),
            reader.leaf_locks_in(6),
            reader.leaf_locks_in(8)
        ),
        (2, 0, 0)
    );
    // What went is free for a writer at once; what stayed is not.
    assert!(m.try_lock_record(&mut writer, 4, 2, X, WHOLE_GAP).unwrap());
    assert!(m.try_lock_record(&mut writer, 6, 1, X, WHOLE_GAP).unwrap());
    m.lock_page(&mut writer, 8, 5, X).unwrap();
    assert!(!m.try_lock_record(&mut writer, 4, 1, X, WHOLE_GAP).unwrap());
    assert_eq!(m.release_shared_leaves_from(&mut reader, mark), 0);
    m.check_invariants();
    m.release_all(&mut reader);
    m.release_all(&mut writer);
    assert_eq!(m.lock_name_count(), 0);
}

#[test]
fn try_lock_upgrade_refused_keeps_the_held_mode() {
    let m = manager(config());
    let (mut t1, mut t2) = (m.begin(TxnId(1)), m.begin(TxnId(2)));
    m.lock_record(&mut t1, 1, 5, S, WHOLE_GAP).unwrap();
    m.lock_record(&mut t2, 1, 5, S, WHOLE_GAP).unwrap();
    assert!(!m.try_lock_record(&mut t1, 1, 5, X, WHOLE_GAP).unwrap());
    assert_eq!(t1.mode_of(rec(1, 5)), Some(S));
    m.release_all(&mut t2);
    assert!(m.try_lock_record(&mut t1, 1, 5, X, WHOLE_GAP).unwrap());
    assert_eq!(t1.mode_of(rec(1, 5)), Some(X));
    m.check_invariants();
    m.release_all(&mut t1);
}

#[test]
fn try_lock_does_not_barge_past_a_waiter() {
    let m = manager(config());
    let mut t1 = m.begin(TxnId(1));
    m.lock_record(&mut t1, 1, 1, S, WHOLE_GAP).unwrap();
    let m2 = m.clone();
    let writer = thread::spawn(move || {
        let mut t2 = m2.begin(TxnId(2));
        m2.lock_record(&mut t2, 1, 1, X, WHOLE_GAP).unwrap();
        m2.release_all(&mut t2);
    });
    until_waiting(&m, TxnId(2));
    let mut t3 = m.begin(TxnId(3));
    // Compatible with the granted S, but T2 waits ahead: refused, whether kept or instant.
    assert!(!m.try_lock_record(&mut t3, 1, 1, S, WHOLE_GAP).unwrap());
    assert!(!m
        .try_lock_record_instant(&mut t3, 1, 1, S, u64::MAX)
        .unwrap());
    assert!(m.is_waiting(TxnId(2)));
    m.check_invariants();
    m.release_all(&mut t1);
    writer.join().unwrap();
    assert!(m.try_lock_record(&mut t3, 1, 1, S, WHOLE_GAP).unwrap());
    m.release_all(&mut t3);
    m.check_invariants();
}

#[test]
fn try_lock_refused_by_a_table_lock_and_at_the_escalation_threshold() {
    let m = manager(LockConfig {
        escalation_threshold: 2,
        ..config()
    });
    let mut owner = m.begin(TxnId(1));
    m.lock_table(&mut owner, 4, S).unwrap();
    let mut t = m.begin(TxnId(2));
    assert!(
        !m.try_lock_record(&mut t, 4, 1, X, WHOLE_GAP).unwrap(),
        "table S blocks IX"
    );
    assert_eq!(t.mode_of(LockName::Table(4)), None);
    assert!(!m.is_waiting(TxnId(2)));
    m.release_all(&mut owner);

    assert!(m.try_lock_record(&mut t, 4, 1, X, WHOLE_GAP).unwrap());
    assert!(m.try_lock_record(&mut t, 4, 2, X, WHOLE_GAP).unwrap());
    // The third would escalate: refused; the unconditional request escalates.
    assert!(!m.try_lock_record(&mut t, 4, 3, X, WHOLE_GAP).unwrap());
    assert_eq!(t.mode_of(rec(4, 3)), None);
    m.lock_record(&mut t, 4, 3, X, WHOLE_GAP).unwrap();
    assert!(t.is_escalated(4));
    assert!(
        m.try_lock_record(&mut t, 4, 4, X, WHOLE_GAP).unwrap(),
        "covered by table X"
    );
    m.check_invariants();
    m.release_all(&mut t);
    assert_eq!(m.lock_name_count(), 0);
}

#[test]
fn escalation_among_other_tables_releases_exactly_the_escalated_leaves() {
    // Held locks keep their bucket index; escalation compacts them. Afterwards every lock
    // must still release through its own bucket: a second transaction then gets X on all.
    let m = manager(LockConfig {
        escalation_threshold: 6,
        ..config()
    });
    let mut t = m.begin(TxnId(1));
    for key in 0..6u64 {
        m.lock_record(&mut t, 1, key * 7919, X, WHOLE_GAP).unwrap();
        m.lock_record(&mut t, 2, key, S, WHOLE_GAP).unwrap();
        m.lock_record(&mut t, 3, key << 40, X, WHOLE_GAP).unwrap();
    }
    m.lock_record(&mut t, 2, 100, S, WHOLE_GAP).unwrap();
    assert!(t.is_escalated(2) && !t.is_escalated(1) && !t.is_escalated(3));
    assert!(t
        .held()
        .iter()
        .all(|(n, _)| !(n.is_leaf() && n.table() == Some(2))));
    assert_eq!(
        t.held().len(),
        1 + 3 + 6 + 6,
        "database, 3 tables, 12 records"
    );
    m.check_invariants();
    let before = m.lock_name_count();
    m.release_all(&mut t);
    assert_eq!(m.lock_name_count(), 0, "{before} names before, none after");
    let mut u = m.begin(TxnId(2));
    for key in 0..6u64 {
        m.lock_record(&mut u, 1, key * 7919, X, WHOLE_GAP).unwrap();
        m.lock_record(&mut u, 2, key, X, WHOLE_GAP).unwrap();
        m.lock_record(&mut u, 3, key << 40, X, WHOLE_GAP).unwrap();
    }
    assert_eq!(u.stats().waits, 0);
    m.release_all(&mut u);
    assert_eq!(m.lock_name_count(), 0);
}

#[test]
fn covered_re_request_is_immediate_even_with_a_waiter() {
    let m = manager(config());
    let mut t1 = m.begin(TxnId(1));
    m.lock_record(&mut t1, 1, 5, X, WHOLE_GAP).unwrap();
    let m2 = m.clone();
    let waiter = thread::spawn(move || {
        let mut t2 = m2.begin(TxnId(2));
        m2.lock_record(&mut t2, 1, 5, S, WHOLE_GAP).unwrap();
        let s = t2.stats();
        m2.release_all(&mut t2);
        s
    });
    until_waiting(&m, TxnId(2));
    // Re-requests of held (or weaker) modes are granted at once; no new grant appears.
    m.lock_record(&mut t1, 1, 5, S, WHOLE_GAP).unwrap();
    m.lock(&mut t1, rec(1, 5), X).unwrap();
    let s = t1.stats();
    assert_eq!(s.waits, 0);
    assert_eq!(s.requests, s.immediate + s.waits);
    assert_eq!(t1.mode_of(rec(1, 5)), Some(X));
    m.check_invariants();
    m.release_all(&mut t1);
    let s2 = waiter.join().unwrap();
    assert_eq!(s2.waits, 1);
    assert_eq!(s2.requests, s2.immediate + s2.waits);
    let total = m.stats();
    assert_eq!(total.requests, total.immediate + total.waits);
    assert_eq!(m.lock_name_count(), 0);
}

// ---- spinning before sleeping (spin_wait) ----

#[test]
fn a_spinning_waiter_is_granted_when_the_holder_releases() {
    // A spin far longer than the wait: the grant must be seen while spinning.
    let m = manager(LockConfig {
        spin_wait: Duration::from_secs(5),
        ..config()
    });
    let mut holder = m.begin(TxnId(1));
    m.lock_record(&mut holder, 1, 1, X, WHOLE_GAP).unwrap();
    let waiter = {
        let m = m.clone();
        thread::spawn(move || {
            let mut t = m.begin(TxnId(2));
            let started = Instant::now();
            m.lock_record(&mut t, 1, 1, S, WHOLE_GAP).unwrap();
            let waited = started.elapsed();
            let mode = t.mode_of(rec(1, 1));
            m.release_all(&mut t);
            (mode, waited)
        })
    };
    until_waiting(&m, TxnId(2));
    thread::sleep(Duration::from_millis(20));
    m.release_all(&mut holder);
    let (mode, waited) = waiter.join().unwrap();
    assert_eq!(mode, Some(S));
    assert!(
        waited < Duration::from_secs(5),
        "granted only after the spin ended"
    );
    assert_eq!(m.stats().waits, 1);
    m.check_invariants();
}

#[test]
fn a_spin_longer_than_the_timeout_still_times_out() {
    let m = manager(LockConfig {
        spin_wait: Duration::from_secs(30),
        wait_timeout: Duration::from_millis(50),
        ..config()
    });
    let mut holder = m.begin(TxnId(1));
    m.lock_record(&mut holder, 1, 1, X, WHOLE_GAP).unwrap();
    let mut t = m.begin(TxnId(2));
    let started = Instant::now();
    let err = m.lock_record(&mut t, 1, 1, X, WHOLE_GAP).unwrap_err();
    assert!(matches!(err, LockError::Timeout { txn: TxnId(2), .. }));
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the spin ignored the deadline"
    );
    m.release_all(&mut t);
    m.release_all(&mut holder);
    assert_eq!(m.lock_name_count(), 0);
    m.check_invariants();
}

#[test]
fn spinning_waiters_find_a_deadlock_once_they_stop_spinning() {
    // Spinners are not in the wait-for graph: the cycle is found by the second of the two
    // to register, when its spin ends — well before the timeout, with exactly one victim.
    let m = manager(LockConfig {
        spin_wait: Duration::from_millis(20),
        ..config()
    });
    let barrier = Arc::new(Barrier::new(2));
    let started = Instant::now();
    let handles: Vec<_> = [(1u64, 2u64), (2, 1)]
        .into_iter()
        .enumerate()
        .map(|(i, (first, second))| {
            let (m, barrier) = (m.clone(), barrier.clone());
            thread::spawn(move || {
                let mut t = m.begin(TxnId(i as u64 + 1));
                m.lock_record(&mut t, 1, first, X, WHOLE_GAP).unwrap();
                barrier.wait();
                let r = m.lock_record(&mut t, 1, second, X, WHOLE_GAP);
                m.release_all(&mut t);
                r.err()
            })
        })
        .collect();
    let errors: Vec<LockError> = handles
        .into_iter()
        .filter_map(|h| h.join().unwrap())
        .collect();
    assert_eq!(
        errors.len(),
        1,
        "exactly one of the two is chosen as the victim"
    );
    assert!(
        matches!(errors[0], LockError::Deadlock { .. }),
        "{:?}",
        errors[0]
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "found only after {:?}",
        started.elapsed()
    );
    let s = m.stats();
    assert_eq!((s.deadlocks, s.timeouts), (1, 0));
    assert_eq!(s.waits_granted(), 1, "the survivor is granted");
    // The cycle is kept, the victim first, each member with the record it waited for.
    let LockError::Deadlock { victim } = errors[0] else {
        unreachable!()
    };
    let report = m.last_deadlock().expect("the deadlock is reported");
    assert_eq!(report.victim(), victim);
    let mut members: Vec<_> = report.cycle.iter().map(|c| (c.txn, c.wants)).collect();
    members.sort_by_key(|m| m.0);
    assert_eq!(
        members,
        [
            (TxnId(1), Some((rec(1, 2), X))),
            (TxnId(2), Some((rec(1, 1), X)))
        ]
    );
    let other = if victim == TxnId(1) { 2 } else { 1 };
    assert_eq!(
        report.to_string(),
        format!(
            "T{} (the victim) waits for X on table 1 record {:#x} → T{other} waits for X on \
             table 1 record {:#x} → T{}",
            victim.0, other, victim.0, victim.0
        )
    );
    m.check_invariants();
    assert_eq!(m.lock_name_count(), 0);
}

#[test]
fn no_deadlock_is_reported_before_one_is_broken() {
    let m = manager(config());
    let mut t = m.begin(TxnId(1));
    m.lock_record(&mut t, 1, 1, X, WHOLE_GAP).unwrap();
    m.release_all(&mut t);
    assert_eq!(m.last_deadlock(), None);
}

#[test]
fn a_spinner_joins_the_wait_for_graph_only_when_it_sleeps() {
    let m = manager(LockConfig {
        spin_wait: Duration::from_millis(300),
        ..config()
    });
    let mut holder = m.begin(TxnId(1));
    m.lock_record(&mut holder, 1, 1, X, WHOLE_GAP).unwrap();
    let waiter = {
        let m = m.clone();
        thread::spawn(move || {
            let mut t = m.begin(TxnId(2));
            m.lock_record(&mut t, 1, 1, X, WHOLE_GAP).unwrap();
            m.release_all(&mut t);
        })
    };
    until_waiting(&m, TxnId(2));
    assert!(!m.is_registered(TxnId(2)), "registered while it spins");
    m.check_invariants();
    // The spin (at most 300 ms) ends; the waiter registers and sleeps.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !m.is_registered(TxnId(2)) {
        assert!(Instant::now() < deadline, "never registered");
        thread::sleep(Duration::from_millis(5));
    }
    m.check_invariants();
    m.release_all(&mut holder);
    waiter.join().unwrap();
    let s = m.stats();
    assert_eq!((s.waits_ended_spinning, s.waits_ended_sleeping), (0, 1));
    assert!(!m.is_registered(TxnId(2)));
    m.check_invariants();
}

#[test]
fn a_request_behind_another_waiter_sleeps_at_once_and_is_nudged_to_the_front() {
    // T1 holds; T2 queues at the front and spins; T3 queues behind T2 (both want X), so it
    // registers and sleeps at once. When T1 releases, T2 is granted and T3, now at the
    // front, is nudged awake to spin for T2's release.
    let m = manager(LockConfig {
        spin_wait: Duration::from_secs(2),
        ..config()
    });
    let mut t1 = m.begin(TxnId(1));
    m.lock_record(&mut t1, 1, 1, X, WHOLE_GAP).unwrap();
    let spawn = |id: u64, hold: Duration| {
        let m = m.clone();
        thread::spawn(move || {
            let mut t = m.begin(TxnId(id));
            m.lock_record(&mut t, 1, 1, X, WHOLE_GAP).unwrap();
            thread::sleep(hold);
            m.release_all(&mut t);
            t.stats()
        })
    };
    let t2 = spawn(2, Duration::from_millis(50));
    until_waiting(&m, TxnId(2));
    let t3 = spawn(3, Duration::ZERO);
    until_waiting(&m, TxnId(3));
    assert!(!m.is_registered(TxnId(2)), "the front request spins");
    assert!(
        m.is_registered(TxnId(3)),
        "a request behind a waiter sleeps at once"
    );
    m.check_invariants();
    m.release_all(&mut t1);
    t2.join().unwrap();
    t3.join().unwrap();
    let s = m.stats();
    assert_eq!(s.waits, 2);
    assert_eq!(
        (s.waits_ended_spinning, s.waits_ended_sleeping),
        (2, 0),
        "T3 was nudged at T2's grant and spun through T2's 50 ms"
    );
    m.check_invariants();
    assert_eq!(m.lock_name_count(), 0);
}

/// The Charm attribution: a waiter blocked behind a chain (t3 waits for t2, which waits for
/// t1) counts its wait as due to I/O exactly when the probe says a transaction on the chain
/// is reading; t1, the chain's end, is "reading" here.
#[test]
fn waits_behind_a_reading_chain_are_attributed_to_io() {
    fn t1_reads(t: TxnId) -> bool {
        t == TxnId(1)
    }
    fn nobody_reads(_: TxnId) -> bool {
        false
    }
    for (probe, attributed) in [(t1_reads as fn(TxnId) -> bool, true), (nobody_reads, false)] {
        let m = manager(LockConfig {
            io_probe: Some(IoProbe {
                in_read: probe,
                period: Duration::from_micros(200),
            }),
            ..config()
        });
        let mut t1 = m.begin(TxnId(1));
        m.lock_record(&mut t1, 1, 1, X, WHOLE_GAP).unwrap();
        let (m2, m3) = (m.clone(), m.clone());
        let t2 = thread::spawn(move || {
            let mut t2 = m2.begin(TxnId(2));
            m2.lock_record(&mut t2, 1, 2, X, WHOLE_GAP).unwrap();
            m2.lock_record(&mut t2, 1, 1, X, WHOLE_GAP).unwrap();
            let io = t2.wait_io_ns();
            m2.release_all(&mut t2);
            io
        });
        until_waiting(&m, TxnId(2));
        let t3 = thread::spawn(move || {
            let mut t3 = m3.begin(TxnId(3));
            m3.lock_record(&mut t3, 1, 2, X, WHOLE_GAP).unwrap();
            let (wait, io) = (t3.stats().wait_ns, t3.wait_io_ns());
            m3.release_all(&mut t3);
            (wait, io)
        });
        until_waiting(&m, TxnId(3));
        thread::sleep(Duration::from_millis(30));
        m.release_all(&mut t1);
        let t2_io = t2.join().unwrap();
        let (t3_wait, t3_io) = t3.join().unwrap();
        if attributed {
            // t3 waited ~30 ms behind t2 behind the reading t1: most of it counts.
            assert!(t3_io >= 15_000_000, "t3: {t3_io} of {t3_wait} ns");
            assert!(t3_io <= t3_wait + 1_000_000, "t3: {t3_io} of {t3_wait} ns");
            assert!(t2_io >= 15_000_000, "t2: {t2_io} ns");
        } else {
            assert_eq!((t2_io, t3_io), (0, 0));
        }
        assert_eq!(m.lock_name_count(), 0);
    }
}

/// Thread-bound transactions ([`LockConfig::thread_bound`]), as a server's worker keeps its
/// connections' open transactions: a request that would wait for a transaction of its own
/// thread is refused at once, whether the holder conflicts with it directly, with the
/// upgrade it asks for, or with a waiter it would queue behind; a holder on another thread
/// is waited for as always.
#[test]
fn a_wait_for_a_transaction_of_the_same_thread_is_refused_when_transactions_are_bound() {
    let m = manager(LockConfig {
        thread_bound: true,
        ..config()
    });
    // Directly: T1 holds X, T2 of the same thread asks for S.
    let mut t1 = m.begin(TxnId(1));
    m.lock(&mut t1, rec(1, 1), X).unwrap();
    let mut t2 = m.begin(TxnId(2));
    let err = m.lock(&mut t2, rec(1, 1), S).unwrap_err();
    assert_eq!(
        err,
        LockError::SameThread {
            txn: TxnId(2),
            holder: TxnId(1),
            name: rec(1, 1)
        }
    );
    assert!(err.is_retryable());
    assert_eq!(t2.stats().waits, 0, "refused before it queued");
    assert_eq!(
        (t2.stats().same_thread, t2.stats().deadlocks),
        (1, 0),
        "counted as a refusal for its own thread, not as a deadlock"
    );
    m.check_invariants();
    m.release_all(&mut t2);
    m.release_all(&mut t1);

    // An upgrade: both hold S, T2 asks for X.
    let mut t1 = m.begin(TxnId(3));
    let mut t2 = m.begin(TxnId(4));
    m.lock(&mut t1, rec(1, 2), S).unwrap();
    m.lock(&mut t2, rec(1, 2), S).unwrap();
    assert!(matches!(
        m.lock(&mut t2, rec(1, 2), X),
        Err(LockError::SameThread {
            holder: TxnId(3),
            ..
        })
    ));
    assert_eq!(
        t2.mode_of(rec(1, 2)),
        Some(S),
        "the refused upgrade left S held"
    );
    m.check_invariants();

    // Behind a waiter: T1 holds S, T5 of another thread waits for X, T2 asks for S (compatible
    // with T1, but queued behind T5, which waits for T1).
    let other = {
        let m = m.clone();
        thread::spawn(move || {
            let mut t5 = m.begin(TxnId(5));
            m.lock(&mut t5, rec(1, 2), X).unwrap();
            m.release_all(&mut t5);
        })
    };
    m.release_all(&mut t2);
    until_waiting(&m, TxnId(5));
    let mut t2 = m.begin(TxnId(6));
    assert!(matches!(
        m.lock(&mut t2, rec(1, 2), S),
        Err(LockError::SameThread {
            holder: TxnId(3),
            ..
        })
    ));
    m.release_all(&mut t2);
    m.release_all(&mut t1);
    other.join().unwrap();

    // A holder on another thread is waited for.
    let held = Arc::new(Barrier::new(2));
    let other = {
        let (m, held) = (m.clone(), held.clone());
        thread::spawn(move || {
            let mut t7 = m.begin(TxnId(7));
            m.lock(&mut t7, rec(1, 3), X).unwrap();
            held.wait();
            until_waiting(&m, TxnId(8));
            m.release_all(&mut t7);
        })
    };
    held.wait();
    let mut t8 = m.begin(TxnId(8));
    m.lock(&mut t8, rec(1, 3), X).unwrap();
    assert_eq!(t8.stats().waits, 1);
    m.release_all(&mut t8);
    other.join().unwrap();
    m.check_invariants();
    assert_eq!(m.lock_name_count(), 0);
    let s = m.stats();
    assert_eq!(
        (s.same_thread, s.deadlocks),
        (3, 0),
        "three refusals, no deadlock"
    );
}

/// Unbound (the default), a wait for a transaction of the same thread ends only by the
/// timeout; binding is switched on at run time for the transactions begun after it.
#[test]
fn unbound_a_same_thread_wait_times_out_and_binding_applies_from_the_next_transaction() {
    let m = manager(LockConfig {
        wait_timeout: Duration::from_millis(30),
        deadlock_check_interval: Duration::from_millis(10),
        ..config()
    });
    let mut t1 = m.begin(TxnId(1));
    m.lock(&mut t1, rec(1, 1), X).unwrap();
    let mut t2 = m.begin(TxnId(2));
    m.set_thread_bound(true);
    assert!(matches!(
        m.lock(&mut t2, rec(1, 1), X),
        Err(LockError::Timeout { .. })
    ));
    m.release_all(&mut t2);
    m.release_all(&mut t1);
    let mut t3 = m.begin(TxnId(3));
    m.lock(&mut t3, rec(1, 1), X).unwrap();
    let mut t4 = m.begin(TxnId(4));
    assert!(matches!(
        m.lock(&mut t4, rec(1, 1), X),
        Err(LockError::SameThread {
            holder: TxnId(3),
            ..
        })
    ));
    m.release_all(&mut t4);
    m.release_all(&mut t3);
    assert_eq!(m.stats().timeouts, 1);
    assert_eq!((m.stats().same_thread, m.stats().deadlocks), (1, 0));
}

/// A cycle through a thread that runs another transaction: T1 idles on thread A holding r1,
/// A's T2 waits for r2, held by T3 on thread B, and T3 asks for r1. T3 waits for T1, which
/// waits for its thread, which waits (in T2) for T3: a deadlock, found at once, not by the
/// timeout; once T3 gives up, T2 is granted.
#[test]
fn a_cycle_through_a_waiting_thread_is_a_deadlock_when_transactions_are_bound() {
    let m = manager(LockConfig {
        thread_bound: true,
        deadlock_check_interval: Duration::from_secs(5),
        ..config()
    });
    let (r1, r2) = (rec(1, 1), rec(1, 2));
    let t3_holds = Arc::new(Barrier::new(2));
    let b = {
        let (m, t3_holds) = (m.clone(), t3_holds.clone());
        thread::spawn(move || {
            let mut t3 = m.begin(TxnId(3));
            m.lock(&mut t3, r2, X).unwrap();
            t3_holds.wait();
            until_waiting(&m, TxnId(2));
            let r = m.lock(&mut t3, r1, X);
            m.release_all(&mut t3);
            r
        })
    };
    let mut t1 = m.begin(TxnId(1));
    m.lock(&mut t1, r1, X).unwrap();
    t3_holds.wait();
    let mut t2 = m.begin(TxnId(2));
    m.lock(&mut t2, r2, X).unwrap();
    assert_eq!(
        b.join().unwrap(),
        Err(LockError::Deadlock { victim: TxnId(3) })
    );
    m.release_all(&mut t2);
    m.release_all(&mut t1);
    m.check_invariants();
    assert_eq!(m.stats().timeouts, 0);
    assert_eq!(m.lock_name_count(), 0);
}
