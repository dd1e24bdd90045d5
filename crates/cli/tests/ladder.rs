//! `glass ladder tpcc` end to end, on a reduced TPC-C (the hidden `--items`/`--customers`
//! knobs) so it fits CI: every rung measured under callgrind and natively, the table, JSON
//! and figures written. Skipped, saying why, where valgrind is not installed.

use std::process::Command;

fn valgrind_missing() -> bool {
    !Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn ladder_measures_every_rung_and_draws_the_figures() {
    if valgrind_missing() {
        eprintln!(
            "SKIPPED ladder_measures_every_rung_and_draws_the_figures: valgrind is not installed"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_glass"))
        .args([
            "ladder",
            "tpcc",
            "--txns",
            "20",
            "--items",
            "1000",
            "--customers",
            "100",
        ])
        .arg("--out")
        .arg(dir.path())
        .output()
        .expect("run glass ladder");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "glass ladder failed: {stderr}");
    // 12 rungs under callgrind, then 3 native rounds of the 12.
    assert!(stderr.contains("[48/48]"), "no progress lines: {stderr}");
    assert!(
        stderr.contains("natively, round 3 of 3"),
        "no native rounds: {stderr}"
    );

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("ladder.json")).unwrap())
            .unwrap();
    let rungs = json["rungs"].as_array().unwrap();
    assert_eq!(rungs.len(), 12);
    // Native runs time ten times the transactions callgrind counts, unless told otherwise.
    assert_eq!(json["config"]["native_txns"], 200);
    let mix = |rung: &serde_json::Value| {
        rung["phases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["phase"] == "mix")
            .unwrap()
            .clone()
    };
    for rung in rungs {
        for phase in rung["phases"].as_array().unwrap() {
            let ins = phase["instructions_per_txn"].as_f64();
            assert!(
                ins.is_some_and(|i| i > 0.0),
                "rung {}: {phase}",
                rung["rung"]
            );
            let us = phase["time_us_per_txn"].as_f64();
            assert!(
                us.is_some_and(|t| t > 0.0),
                "rung {}: {phase}",
                rung["rung"]
            );
            // One time per native round, and the reported time is their median.
            let mut runs: Vec<f64> = phase["time_us_runs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_f64().unwrap())
                .collect();
            runs.sort_by(f64::total_cmp);
            assert_eq!(runs.len(), 3, "rung {}: {phase}", rung["rung"]);
            assert_eq!(us, Some(runs[1]), "rung {}: {phase}", rung["rung"]);
            // The operations split the whole count.
            let ops: f64 = phase["by_operation"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p[1].as_f64().unwrap())
                .sum();
            assert!(
                (ops - ins.unwrap()).abs() < 1.0,
                "rung {}: {phase}",
                rung["rung"]
            );
        }
    }
    // The full engine runs many times the kernel's instructions; the stripped engine fewer
    // than the full one.
    let full = mix(&rungs[0])["instructions_per_txn"].as_f64().unwrap();
    let stripped = mix(&rungs[10])["instructions_per_txn"].as_f64().unwrap();
    let kernel = mix(&rungs[11])["instructions_per_txn"].as_f64().unwrap();
    assert!(full > 10.0 * kernel, "full {full}, kernel {kernel}");
    assert!(stripped < full, "stripped {stripped}, full {full}");

    for figure in [
        "staircase",
        "breakdown-new-order",
        "breakdown-payment",
        "instructions-vs-time",
    ] {
        for ext in ["svg", "png"] {
            let path = dir.path().join(format!("{figure}.{ext}"));
            let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            assert!(len > 1000, "{} missing or empty", path.display());
        }
    }
    let md = std::fs::read_to_string(dir.path().join("ladder.md")).unwrap();
    assert!(md.contains("| 11 | optimal |"), "{md}");
    assert!(md.contains("1.73 M"), "{md}");
}

#[test]
fn profile_counts_instructions_per_transaction_type() {
    if valgrind_missing() {
        eprintln!(
            "SKIPPED profile_counts_instructions_per_transaction_type: valgrind is not installed"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_glass"))
        .args(["profile", "tpcb", "--instructions", "--txns", "20", "--out"])
        .arg(dir.path())
        .output()
        .expect("run glass profile");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (table4, instructions) = stdout
        .split_once("instructions per transaction by component")
        .unwrap_or_else(|| panic!("no instruction table: {stdout}"));
    // Table 4: one TPC-B transaction reads and writes account, teller, branch and inserts
    // history: records accessed and row locks are positive, and so are pages and log bytes.
    let counters = table4
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("20"))
        .unwrap_or_else(|| panic!("no Table 4 row of 20 transactions: {stdout}"));
    let fields: Vec<f64> = counters
        .split_whitespace()
        .skip(2)
        .map(|f| f.parse().unwrap())
        .collect();
    assert!(
        fields[0] >= 4.0 && fields[1] >= 4.0,
        "records, row locks: {counters}"
    );
    assert!(
        fields[3] > 0.0 && fields[6] > 0.0,
        "heap pages, log bytes: {counters}"
    );
    let row = instructions
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("20"))
        .unwrap_or_else(|| panic!("no row of 20 transactions: {stdout}"));
    let instructions: f64 = row.split_whitespace().nth(2).unwrap().parse().unwrap();
    assert!(instructions > 1000.0, "{row}");
}
