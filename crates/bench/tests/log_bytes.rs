//! Log bytes per transaction (`glass profile`'s `log-B` and `pad-B`): a transaction's records
//! are the same whether its thread reserves log-buffer bytes a run at a time or record by
//! record, and only runs leave padding. Before the padding was counted apart, `log-B` was the
//! log's growth, runs' padding and reserved bytes included: New-Order 5,630 bytes with runs
//! against 4,979 without.

use std::sync::Arc;

use bench::table4::{self, TypeProfile};
use engine::db::DbConfig;
use workloads::{Mix, WorkloadOptions};

/// `glass profile WORKLOAD` in memory on one thread (the database set up for `set_up_for`):
/// `counts.warmup` transactions of the mix, then `counts.txns` of each type.
fn profile(
    workload: &str,
    options: WorkloadOptions,
    log_runs: bool,
    set_up_for: usize,
    counts: table4::Counts,
) -> Vec<TypeProfile> {
    let workload: Arc<dyn workloads::Workload> = workloads::by_name(workload, &options).unwrap();
    let db = DbConfig {
        pool_mib: 256,
        log_runs,
        ..DbConfig::default()
    };
    table4::run(workload, &options, &db, set_up_for, counts, 7).unwrap()
}

/// The paper mix at one warehouse, 300 transactions of each type, no warm-up.
fn paper_mix(log_runs: bool) -> Vec<TypeProfile> {
    let options = WorkloadOptions {
        scale: 1,
        mix: Mix::Paper,
        ..WorkloadOptions::default()
    };
    let counts = table4::Counts {
        warmup: 0,
        txns: 300,
    };
    profile("tpcc", options, log_runs, 2, counts)
}

#[test]
fn a_transactions_log_records_are_counted_apart_from_the_padding_of_runs() {
    let with_runs = paper_mix(true);
    let without = paper_mix(false);
    for (a, b) in with_runs.iter().zip(&without) {
        assert_eq!(a.name, b.name);
        assert!(a.sum.log_bytes > 0, "{}: logs nothing", a.name);
        // The same transactions, seeded alike, on one thread: the same records, byte for byte.
        assert_eq!(
            (a.txns, a.sum.log_bytes),
            (b.txns, b.sum.log_bytes),
            "{}: transactions and bytes of records, with runs and without",
            a.name
        );
        assert_eq!(b.sum.log_padding, 0, "{}: padding without runs", b.name);
    }
    let new_order = &with_runs[0];
    assert_eq!(new_order.name, "new_order");
    assert!(
        new_order.sum.log_padding > 0,
        "New-Order's runs were closed with padding, which is counted"
    );
}

/// TPC-B's log bytes a transaction on one thread, after `warmup` transactions, over `txns`.
fn tpcb_log_bytes(warmup: u64, txns: u64) -> f64 {
    let options = WorkloadOptions {
        scale: 2,
        ..WorkloadOptions::default()
    };
    let types = profile("tpcb", options, true, 1, table4::Counts { warmup, txns });
    assert_eq!(types.len(), 1, "TPC-B has one transaction type");
    types[0].sum.log_bytes as f64 / types[0].txns as f64
}

/// A profile is of the database's steady state, not a freshly loaded one's: right after the
/// load, TPC-B's history index has few leaves, each holding several tellers' keys, and an
/// insert ahead of another teller's keys logs their shifted slots; after the warm-up, a profile
/// logs what a later window of the same run does.
#[test]
fn the_warm_up_profiles_a_grown_database_not_a_young_one() {
    let young = tpcb_log_bytes(0, 1_000);
    let warmed = tpcb_log_bytes(table4::DEFAULT_WARMUP, 1_000);
    let later = tpcb_log_bytes(3 * table4::DEFAULT_WARMUP, 1_000);
    assert!(
        young > warmed * 1.1,
        "a young database logs more: {young:.0} against {warmed:.0} bytes a transaction"
    );
    assert!(
        (warmed - later).abs() < later * 0.02,
        "after the default warm-up the figure holds: {warmed:.0} against {later:.0} later"
    );
}
