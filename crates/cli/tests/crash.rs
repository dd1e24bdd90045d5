//! A short crash campaign, as CI runs it: every workload, durable and not, killed with
//! SIGKILL at random moments; after each kill `glass check --ack-log` must find the database
//! intact and every acknowledged durable commit in it. (`glass crash --kills 1000` is the
//! long campaign; its figures are in docs/performance.md.)

use std::process::Command;

#[test]
fn a_short_crash_campaign_loses_no_database_and_no_acknowledged_commit() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("campaign.json");
    let out = Command::new(env!("CARGO_BIN_EXE_glass"))
        .args([
            "crash",
            "--kills",
            "24",
            "--jobs",
            "2",
            "--max-run",
            "1.5",
            "--dir",
        ])
        .arg(dir.path().join("lanes"))
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    let result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let lanes = result["lanes"].as_array().unwrap();
    assert_eq!(lanes.len(), 8, "four workloads, durable and not");
    let sum = |field: &str| -> u64 { lanes.iter().map(|l| l[field].as_u64().unwrap()).sum() };
    assert_eq!(sum("kills"), 24);
    assert_eq!(sum("checks_passed"), 24, "{text}");
    assert_eq!(sum("durable_missing"), 0, "{text}");
    // The durable lanes' checks looked commits up: the campaign verified something.
    assert!(sum("durable_receipts") > 0, "{text}");
}

/// The same with a buffer pool far smaller than the data: the benches evict pages their
/// running transactions dirtied (steal), so each recovery must undo changes that reached the
/// page file, not only redo the ones that did not.
#[test]
fn a_crash_campaign_with_a_pool_smaller_than_the_data_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("campaign.json");
    let out = Command::new(env!("CARGO_BIN_EXE_glass"))
        .args([
            "crash",
            "--workloads",
            "ycsb,tpcb",
            "--kills",
            "8",
            "--jobs",
            "2",
            "--threads",
            "4",
            "--max-run",
            "3",
            "--pool-mib",
            "1",
            "--dir",
        ])
        .arg(dir.path().join("lanes"))
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    let result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let lanes = result["lanes"].as_array().unwrap();
    let sum = |field: &str| -> u64 { lanes.iter().map(|l| l[field].as_u64().unwrap()).sum() };
    assert_eq!(sum("checks_passed"), 8, "{text}");
    assert_eq!(sum("durable_missing"), 0, "{text}");
    // The checks' recoveries met logged changes already in the page file (written back by
    // evictions and checkpoints while the benches ran), and the campaign read their counts.
    assert!(sum("found_on_disk") > 0, "{text}");
}
