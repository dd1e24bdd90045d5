//! A minimal closed-loop driver for the workload tests (the real driver lives in `bench`).

#![allow(dead_code)]

use std::sync::Arc;

use engine::db::{Database, DbConfig};
use engine::TxError;
use workloads::{Condition, Workload};

pub fn open(threads: usize) -> Arc<Database> {
    Database::open(DbConfig {
        threads,
        ..DbConfig::default()
    })
    .expect("open an in-memory database")
}

pub fn loaded(workload: &dyn Workload, threads: usize) -> Arc<Database> {
    let db = open(threads);
    workload.create_schema(&db).expect("create schema");
    workload.load(&db, &|_, _| {}).expect("load");
    db
}

/// What a run did, per transaction type.
#[derive(Debug, Default, Clone)]
pub struct Outcome {
    pub committed: Vec<u64>,
    pub user_aborts: Vec<u64>,
    pub retries: u64,
}

/// Runs `txns` transactions on each of `threads` terminals: begin → run → commit, abort on a
/// spec-mandated rollback, retry on a retryable error; any other error fails the test.
pub fn run(
    db: &Arc<Database>,
    workload: &Arc<dyn Workload>,
    threads: usize,
    txns: usize,
) -> Outcome {
    let types = workload.txn_names().len();
    let outcomes: Vec<Outcome> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|id| {
                let (db, workload) = (db.clone(), workload.clone());
                s.spawn(move || {
                    let mut out = Outcome {
                        committed: vec![0; types],
                        user_aborts: vec![0; types],
                        retries: 0,
                    };
                    let mut terminal = workload
                        .terminal(&db, id, threads, 1000 + id as u64)
                        .expect("terminal");
                    for _ in 0..txns {
                        let kind = terminal.next();
                        loop {
                            let mut txn = db.begin().expect("begin");
                            match terminal.run(&mut txn) {
                                Ok(()) => match txn.commit() {
                                    Ok(()) => {
                                        out.committed[kind] += 1;
                                        break;
                                    }
                                    Err(e) if e.is_retryable() => out.retries += 1,
                                    Err(e) => panic!("commit failed: {e}"),
                                },
                                Err(TxError::UserAbort(_)) => {
                                    txn.abort().expect("abort");
                                    out.user_aborts[kind] += 1;
                                    break;
                                }
                                Err(e) if e.is_retryable() => {
                                    txn.abort().expect("abort");
                                    out.retries += 1;
                                }
                                Err(e) => panic!("{} failed: {e}", workload.txn_names()[kind]),
                            }
                        }
                    }
                    out
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut total = Outcome {
        committed: vec![0; types],
        user_aborts: vec![0; types],
        retries: 0,
    };
    for o in outcomes {
        for i in 0..types {
            total.committed[i] += o.committed[i];
            total.user_aborts[i] += o.user_aborts[i];
        }
        total.retries += o.retries;
    }
    total
}

pub fn assert_all_hold(conditions: &[Condition]) {
    let failed: Vec<_> = conditions.iter().filter(|c| !c.holds()).collect();
    assert!(failed.is_empty(), "violated: {failed:#?}");
}
