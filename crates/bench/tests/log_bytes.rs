//! Log bytes per transaction (`glass profile`'s `log-B` and `pad-B`): a transaction's records
//! are the same whether its thread reserves log-buffer bytes a run at a time or record by
//! record, and only runs leave padding. Before the padding was counted apart, `log-B` was the
//! log's growth, runs' padding and reserved bytes included: New-Order 5,630 bytes with runs
//! against 4,979 without.

use std::sync::Arc;

use bench::table4::{self, TypeProfile};
use engine::db::DbConfig;
use workloads::{Mix, WorkloadOptions};

fn profile(log_runs: bool) -> Vec<TypeProfile> {
    let options = WorkloadOptions {
        scale: 1,
        mix: Mix::Paper,
        ..WorkloadOptions::default()
    };
    let workload: Arc<dyn workloads::Workload> = workloads::by_name("tpcc", &options).unwrap();
    let db = DbConfig {
        pool_mib: 256,
        log_runs,
        ..DbConfig::default()
    };
    table4::run(workload, &options, &db, 2, 300, 7).unwrap()
}

#[test]
fn a_transactions_log_records_are_counted_apart_from_the_padding_of_runs() {
    let with_runs = profile(true);
    let without = profile(false);
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
