//! `glass bench tpcc --mix paper --preset optimal`: the kernel under the engine's driver, its
//! consistency judged by TPC-C's own conditions, and the configurations it refuses.

use std::time::Duration;

use bench::optimal::{kernel_conditions, refuse_kernel};
use bench::run::{build_switches, run_load};
use bench::{run_bench, BenchConfig, Stop};
use engine::{Preset, Switches, Value};
use kernel::{generate_inputs_for, Kernel, Scale, Table};
use workloads::Mix;

fn kernel_config(txns: u64) -> BenchConfig {
    let mut config = BenchConfig::new("tpcc");
    config.options.mix = Mix::Paper;
    config.threads = 1;
    config.stop = Stop::Txns(txns);
    config.warmup = Duration::ZERO;
    config.quiet = true;
    config.db.switches = Switches::preset(Preset::Optimal);
    config
}

#[test]
fn the_kernel_runs_several_rounds_on_one_population() {
    let mut config = kernel_config(1_000);
    config.rounds = 2;
    let result = run_bench(&config).expect("kernel bench");
    assert_eq!(result.rounds.len(), 2);
    assert_eq!(result.txn_count, 2_000);
    // The second round went on with the first one's database: the conditions hold over both.
    assert_eq!(result.consistency, "ok", "{:?}", result.conditions);
}

#[test]
fn the_optimal_preset_runs_the_kernel_through_the_driver() {
    let result = run_bench(&kernel_config(3_000)).expect("kernel bench");
    assert_eq!(result.config.preset, "optimal");
    assert_eq!(result.txn_count, 3_000);
    assert_eq!(result.commits, 3_000, "the paper's mix never rolls back");
    assert_eq!(result.consistency, "ok", "{:?}", result.conditions);
    // The kernel's own invariants and TPC-C's twelve conditions.
    assert_eq!(result.conditions.len(), 13);
    let count = |name: &str| {
        result
            .by_type
            .iter()
            .find(|t| t.name == name)
            .map_or(0, |t| t.count)
    };
    let (new_orders, payments) = (count("new_order"), count("payment"));
    assert_eq!(new_orders + payments, 3_000);
    assert!(
        (1_300..=1_700).contains(&new_orders),
        "about half New-Order: {new_orders}"
    );
}

/// A kernel with fewer items than the specification's (the conditions do not look at them;
/// the population's year-to-date sums assume 3,000 customers per district) after a few
/// hundred transactions of the paper's mix.
fn small_kernel() -> Kernel {
    let scale = Scale {
        warehouses: 1,
        items: 1_000,
        customers_per_district: 3_000,
    };
    let mut kernel = Kernel::populate(scale, 5).expect("populate");
    kernel.run_mix(&generate_inputs_for(6, 400, scale));
    kernel
}

#[test]
fn the_kernels_consistency_holds_and_catches_a_broken_warehouse() {
    let kernel = small_kernel();
    let broken: Vec<_> = kernel_conditions(&kernel)
        .into_iter()
        .filter(|c| !c.holds())
        .collect();
    assert!(broken.is_empty(), "{broken:?}");

    // W_YTD off by one cent: conditions 1 (Σ D_YTD) and 8 (Σ H_AMOUNT) must fail, nothing else.
    let ytd_column = Table::Warehouse
        .columns()
        .iter()
        .position(|c| *c == "w_ytd")
        .expect("w_ytd column");
    let tampered = Kernel::from_rows(|table| {
        let mut rows = kernel.rows(table);
        if table == Table::Warehouse {
            let Value::Float(ytd) = rows[0][ytd_column] else {
                panic!("w_ytd is a float");
            };
            rows[0][ytd_column] = Value::Float(ytd + 0.01);
        }
        rows
    })
    .expect("rebuild");
    let failed: Vec<String> = kernel_conditions(&tampered)
        .into_iter()
        .filter(|c| !c.holds())
        .map(|c| c.name)
        .collect();
    assert_eq!(failed, ["TPC-C 3.3.2.1", "TPC-C 3.3.2.8"]);
}

#[test]
fn the_kernel_refuses_what_it_cannot_run_with_the_flag_to_change() {
    let error = |config: BenchConfig| run_bench(&config).unwrap_err().to_string();

    let mut config = kernel_config(10);
    config.options.mix = Mix::Full;
    assert!(error(config).contains("--mix paper"));

    let mut config = kernel_config(10);
    config.workload = "tpcb".into();
    assert!(error(config).contains("TPC-C only"));

    let mut config = kernel_config(10);
    config.db.path = Some(std::env::temp_dir().join("glass-kernel-has-no-directory"));
    assert!(error(config).contains("drop --db"));

    // Threads and switches are refused where the switches are built.
    let threads = build_switches("optimal", &[], 2).unwrap_err().to_string();
    assert!(threads.contains("single-threaded"), "{threads}");
    let switch = build_switches("optimal", &["locking=on".to_string()], 1)
        .unwrap_err()
        .to_string();
    assert!(switch.contains("no switches"), "{switch}");

    // Commands that need the engine name the command.
    let optimal = Switches::preset(Preset::Optimal);
    let profile = refuse_kernel(&optimal, "glass profile").unwrap_err();
    assert!(profile
        .to_string()
        .contains("glass profile needs the engine"));
    assert!(refuse_kernel(&Switches::preset(Preset::Stripped), "glass profile").is_ok());
    let mut db = engine::DbConfig {
        switches: optimal,
        ..engine::DbConfig::default()
    };
    db.path = Some(std::env::temp_dir().join("glass-kernel-load"));
    let options = kernel_config(10).options;
    let load = run_load("tpcc", &options, &db, true)
        .unwrap_err()
        .to_string();
    assert!(load.contains("glass load needs the engine"), "{load}");
}
