//! Every execution strategy against TPC-C with a buffer pool far smaller than the data, four
//! terminals at once: the database must pass TPC-C's consistency conditions afterwards, and
//! each strategy must have done what it is for (fetch stages, conversions, classifications).

use std::time::Duration;

use bench::{run_bench, BenchConfig, Stop};
use engine::db::DbConfig;
use engine::execution::{ExecutionConfig, Strategy, TypeSummary};
use workloads::Mix;

/// One warehouse (about 130 MiB on disk) through a 4 MiB pool, the paper's mix, page locks.
fn config(dir: &std::path::Path, strategy: Strategy) -> BenchConfig {
    let mut config = BenchConfig::new("tpcc");
    config.options.scale = 1;
    config.options.mix = Mix::Charm;
    config.threads = 4;
    config.stop = Stop::Txns(300);
    config.warmup = Duration::ZERO;
    config.quiet = true;
    config.db = DbConfig {
        path: Some(dir.to_path_buf()),
        pool_mib: 4,
        page_locking: true,
        ..DbConfig::default()
    };
    config.execution = Some(ExecutionConfig {
        strategy,
        ..ExecutionConfig::default()
    });
    config
}

fn sum(by_type: &[(String, TypeSummary)], f: impl Fn(&TypeSummary) -> u64) -> u64 {
    by_type.iter().map(|(_, t)| f(t)).sum()
}

#[test]
fn every_strategy_leaves_tpcc_consistent_with_a_small_pool() {
    let dir = tempfile::tempdir().unwrap();
    for strategy in Strategy::ALL {
        let result = run_bench(&config(dir.path(), strategy)).unwrap();
        assert_eq!(result.consistency, "ok", "{strategy}: {}", result.render());
        let execution = result.execution.as_ref().expect("an execution summary");
        assert_eq!(execution.strategy, strategy.name());
        let by_type = &execution.by_type;
        let instances = sum(by_type, |t| t.instances);
        assert!(instances >= 300, "{strategy}: {instances}");
        let reads = sum(by_type, |t| t.reads);
        assert!(reads > 0, "{strategy}: a 4 MiB pool read nothing");
        let two_stage = sum(by_type, |t| t.two_stage);
        match strategy {
            Strategy::Conventional => {
                assert_eq!(two_stage, 0);
                assert_eq!(sum(by_type, |t| t.pinned_pages), 0);
            }
            Strategy::Tste => {
                assert_eq!(two_stage, instances, "every instance fetches first");
                assert!(sum(by_type, |t| t.fetch_reads) > 0);
                assert!(sum(by_type, |t| t.pinned_pages) > 0);
            }
            Strategy::Otste => {
                assert!(sum(by_type, |t| t.converted) > 0, "{}", result.render());
                assert_eq!(sum(by_type, |t| t.ran_otste), instances);
            }
            Strategy::Htste | Strategy::HtstePaper => {
                assert!(!execution.decisions.is_empty(), "no classification logged");
            }
        }
        if strategy == Strategy::HtstePaper {
            let payment = execution.get("payment").unwrap();
            assert_eq!(payment.ran_otste, payment.instances);
            let new_order = execution.get("new_order").unwrap();
            assert_eq!(new_order.ran_tste, new_order.instances);
        }
        assert!(result.new_order_tpm.unwrap() > 0.0);
    }
}
