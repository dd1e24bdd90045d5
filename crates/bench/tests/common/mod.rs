//! What the bench crate's profile tests share.

use std::sync::Arc;

use bench::table4::{self, TypeProfile};
use engine::db::DbConfig;
use workloads::{Mix, WorkloadOptions};

/// `glass profile tpcc --mix paper` at scale 1, in memory: `txns` transactions of each type,
/// the database set up for `set_up_for` threads.
pub fn profile_paper_mix(set_up_for: usize, txns: u64) -> Vec<TypeProfile> {
    profile_tpcc(Mix::Paper, set_up_for, txns)
}

/// `glass profile tpcc --mix MIX` at scale 1, in memory.
pub fn profile_tpcc(mix: Mix, set_up_for: usize, txns: u64) -> Vec<TypeProfile> {
    let options = WorkloadOptions {
        scale: 1,
        mix,
        ..WorkloadOptions::default()
    };
    let workload: Arc<dyn workloads::Workload> = workloads::by_name("tpcc", &options).unwrap();
    let db = DbConfig {
        pool_mib: 256,
        ..DbConfig::default()
    };
    let counts = table4::Counts { warmup: 0, txns };
    table4::run(workload, &options, &db, set_up_for, counts, 7).unwrap()
}
