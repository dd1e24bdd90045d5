//! The ack log end to end: a durable run of each workload records its acknowledged commits,
//! and every one of them is found in the database afterwards; a receipt of a commit that is
//! not in the database is reported as lost.

use std::time::Duration;

use bench::acklog::{parse, verify};
use bench::{run_bench, BenchConfig, Stop};
use engine::db::{Database, DbConfig};

fn run_with_ack_log(workload: &str, scale: u64, ycsb: char) -> (tempfile::TempDir, usize) {
    let dir = tempfile::tempdir().unwrap();
    let db_dir = dir.path().join("db");
    let acks = dir.path().join("acks");
    let mut config = BenchConfig::new(workload);
    config.options.scale = scale;
    config.options.ycsb_workload = ycsb;
    config.options.ycsb_distribution = workloads::Distribution::standard_for(ycsb);
    config.threads = 2;
    config.stop = Stop::Txns(300);
    config.warmup = Duration::ZERO;
    config.quiet = true;
    config.ack_log = Some(acks.clone());
    config.db = DbConfig {
        path: Some(db_dir.clone()),
        durable: true,
        pool_mib: 64,
        ..DbConfig::default()
    };
    let result = run_bench(&config).unwrap();
    assert_eq!(result.consistency, "ok");

    let db = Database::open(DbConfig {
        path: Some(db_dir),
        pool_mib: 64,
        ..DbConfig::default()
    })
    .unwrap();
    let report = verify(&db, workload, &acks).unwrap();
    assert!(report.holds(), "{}", report.render());
    assert_eq!(report.runs, 1);
    assert_eq!(report.not_durable, 0);
    db.close().unwrap();
    (dir, report.durable)
}

#[test]
fn every_acknowledged_tpcc_commit_is_found() {
    let (dir, receipts) = run_with_ack_log("tpcc", 1, 'C');
    // New-Order and Payment are 88% of the mix, and each leaves one receipt.
    assert!(receipts > 200, "only {receipts} receipts");
    let text = std::fs::read_to_string(dir.path().join("acks")).unwrap();
    let tables: std::collections::BTreeSet<String> = parse(&text).unwrap().runs[0]
        .receipts
        .iter()
        .map(|(_, r)| format!("{}{}", if r.present { '+' } else { '-' }, r.table))
        .collect();
    for kind in ["+orders", "+history", "-new_order"] {
        assert!(tables.contains(kind), "no {kind} receipt among {tables:?}");
    }
}

#[test]
fn every_acknowledged_commit_of_the_other_workloads_is_found() {
    assert!(
        run_with_ack_log("tpcb", 1, 'C').1 >= 300,
        "one receipt per commit"
    );
    assert!(run_with_ack_log("voter", 1, 'C').1 > 0);
    // YCSB D: 5% inserts, the only YCSB operation whose effect no later one overwrites.
    assert!(run_with_ack_log("ycsb", 2000, 'D').1 > 0);
}

#[test]
fn a_receipt_the_database_does_not_hold_is_reported_lost() {
    let (dir, _) = run_with_ack_log("tpcb", 1, 'C');
    let acks = dir.path().join("acks");
    let mut text = std::fs::read_to_string(&acks).unwrap();
    text.push_str("+ tpcb_history 1 999999\n- tpcb_account 1\n");
    std::fs::write(&acks, text).unwrap();
    let db = Database::open(DbConfig {
        path: Some(dir.path().join("db")),
        pool_mib: 64,
        ..DbConfig::default()
    })
    .unwrap();
    let report = verify(&db, "tpcb", &acks).unwrap();
    assert!(!report.holds());
    assert_eq!(report.durable_missing.len(), 2, "{}", report.render());
    let rendered = report.render();
    assert!(
        rendered.contains("tpcb_history row (1, 999999) is missing"),
        "{rendered}"
    );
    assert!(
        rendered.contains("tpcb_account row (1) is back"),
        "{rendered}"
    );
    // A log of another workload is an error, not a report.
    let err = verify(&db, "tpcc", &acks).unwrap_err().to_string();
    assert!(err.contains("not tpcc"), "{err}");
    db.close().unwrap();
}
