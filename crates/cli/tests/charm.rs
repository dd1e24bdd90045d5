//! `glass charm`: a quick run on one warehouse with a short device latency measures every
//! experiment and writes charm.md (every table and figure named, the goals marked), charm.json
//! (each run with its tpmC and consistency) and the figures, keeping the loaded database and
//! removing its working copies; bad options are refused in one line before anything runs.

use std::path::Path;

use serde_json::Value;

mod common;
use common::{glass, path, text, Running};

#[test]
fn a_quick_run_writes_every_table_and_figure() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("results");
    let db = tmp.path().join("databases");
    let run = glass(&[
        "charm",
        "--quick",
        "--warehouses",
        "1",
        "--duration",
        "0.5",
        "--warmup",
        "0.2",
        "--threads-list",
        "2",
        "--read-us",
        "200",
        "--db",
        path(&db),
        "--out",
        path(&out),
    ]);
    let (stdout, stderr) = (text(&run.stdout), text(&run.stderr));
    assert_eq!(run.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stderr.contains(" run 1 of "), "{stderr}");
    assert!(stdout.contains("charm.md"), "{stdout}");

    let md = std::fs::read_to_string(out.join("charm.md")).unwrap();
    for table in 1..=8 {
        assert!(
            md.contains(&format!("Table {table}")),
            "no Table {table}:\n{md}"
        );
    }
    for figure in ["2a", "2b", "3a", "3b", "4", "5a", "5b"] {
        assert!(
            md.contains(&format!("Figure {figure}")),
            "no Figure {figure}:\n{md}"
        );
    }
    let goals = md
        .lines()
        .filter(|l| l.starts_with("- ✓") || l.starts_with("- ✗"));
    assert_eq!(goals.count(), 3, "{md}");
    assert!(
        md.contains("HTSTE's threshold\n\nNot run (--quick)"),
        "{md}"
    );

    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("charm.json")).unwrap()).unwrap();
    // The share of the machine's CPU others took while it measured: a fraction, whatever else
    // this machine runs.
    let others = json["others_cpu_share"].as_f64().expect("others_cpu_share");
    assert!((0.0..=1.0).contains(&others), "{others}");
    let calibration = &json["calibration"];
    assert_eq!(calibration["read_us"], 200, "{calibration}");
    assert!(
        calibration["cpu_us"].as_f64().unwrap() > 0.0,
        "{calibration}"
    );
    let pools: Vec<u64> = calibration["pools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["mib"].as_u64().unwrap())
        .collect();
    assert_eq!(pools.len(), 4, "{calibration}");
    assert!(pools.windows(2).all(|p| p[0] <= p[1]), "{calibration}");
    assert_eq!(pools[3], 2 * pools[2], "{calibration}");

    let runs = json["runs"].as_array().unwrap();
    for run in runs {
        assert_eq!(run["result"]["consistency"], "ok", "{run}");
        assert_eq!(run["result"]["threads"], run["spec"]["threads"], "{run}");
    }
    for strategy in ["conventional", "htste", "otste", "tste"] {
        assert!(
            runs.iter()
                .any(|r| r["spec"]["strategy"] == strategy && r["tpmc"].as_f64().unwrap() > 0.0),
            "no {strategy} run with a tpmC above 0: {json}"
        );
    }
    // Every (concurrency, strategy) point of the sweep, and Table 7's four strategies.
    let sweep = json["tables"]["concurrency"]["points"].as_array().unwrap();
    assert_eq!(sweep.len(), 1, "{json}");
    for point in sweep {
        for strategy in ["conventional", "htste"] {
            assert!(point[strategy]["tpmc"].as_f64().unwrap() > 0.0, "{point}");
        }
    }
    let table7 = json["tables"]["table7"].as_array().unwrap();
    assert_eq!(table7.len(), 4, "{json}");
    assert!(
        table7.iter().all(|r| r["tpmc"].as_f64().unwrap() > 0.0),
        "{json}"
    );
    // Each run on a fresh copy of the load, its pool filled first.
    assert!(
        runs.iter().all(|r| r["refill_reads"].as_u64().unwrap() > 0),
        "{json}"
    );

    if Path::new(bench::plot::FONT_PATH).exists() {
        for figure in ["fig2a", "fig2b", "fig3a", "fig3b", "fig4", "fig5a", "fig5b"] {
            for ext in ["svg", "png"] {
                assert!(
                    out.join(format!("{figure}.{ext}")).exists(),
                    "no {figure}.{ext}"
                );
            }
        }
    }
    // The load is kept for the next command; the runs' copies are gone.
    assert!(db.join("tpcc-1w").join("glass-load.json").exists());
    assert!(!db.join("charm-work").exists());
}

/// With `--rounds 2` the plan runs twice, round after round, each round from its own seeds:
/// every point has a run in each round, the report gives both rounds' tpmC with their median,
/// and the goal's ratio by round.
#[test]
fn rounds_run_the_plan_again_and_report_every_round() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("results");
    let run = glass(&[
        "charm",
        "--quick",
        "--warehouses",
        "1",
        "--duration",
        "0.4",
        "--warmup",
        "0.1",
        "--threads-list",
        "4",
        "--read-us",
        "200",
        "--skip",
        "buffer,table6,table7,table8",
        "--rounds",
        "2",
        "--out",
        path(&out),
    ]);
    let (stdout, stderr) = (text(&run.stdout), text(&run.stderr));
    assert_eq!(run.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stderr.contains("run 4 of 4 (round 2 of 2)"), "{stderr}");

    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("charm.json")).unwrap()).unwrap();
    let runs = json["runs"].as_array().unwrap();
    let rounds: Vec<u64> = runs.iter().map(|r| r["round"].as_u64().unwrap()).collect();
    assert_eq!(rounds, [0, 0, 1, 1], "{json}");
    // The same two points in each round, in the same order.
    assert_eq!(runs[0]["spec"], runs[2]["spec"], "{json}");
    assert_eq!(runs[1]["spec"], runs[3]["spec"], "{json}");
    let points = json["tables"]["rounds"].as_array().unwrap();
    assert_eq!(points.len(), 2, "{json}");
    for point in points {
        let tpmc: Vec<f64> = point["tpmc"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_f64().unwrap())
            .collect();
        assert_eq!(tpmc.len(), 2, "{point}");
        assert!(tpmc.iter().all(|&t| t > 0.0), "{point}");
        let median = point["median"].as_f64().unwrap();
        assert!(
            (median - (tpmc[0] + tpmc[1]) / 2.0).abs() < 1e-6 * median,
            "{point}"
        );
        assert_eq!(point["min"].as_f64().unwrap(), tpmc[0].min(tpmc[1]));
    }
    let md = std::fs::read_to_string(out.join("charm.md")).unwrap();
    assert!(md.contains("## Rounds"), "{md}");
    assert!(
        md.contains("| round 1 | round 2 | median | range |"),
        "{md}"
    );
    assert!(md.contains("the median of the rounds' ×"), "{md}");
}

/// Ctrl-C ends the plan in order: the run then measuring is checked and left out, the report
/// and its JSON cover the run made before it and say so, the command exits 130. Without a
/// handler it died at once and wrote no report.
#[test]
fn ctrl_c_ends_the_plan_with_a_report_of_the_runs_made() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("results");
    let mut charm = Running::start(
        tmp.path(),
        &[
            "charm",
            "--quick",
            "--warehouses",
            "1",
            "--threads-list",
            "4",
            "--duration",
            "3",
            "--warmup",
            "0.1",
            "--read-us",
            "200",
            "--skip",
            "buffer,table6,table7,table8",
            "--out",
            path(&out),
        ],
    );
    // The second of the plan's two runs has begun.
    charm.wait_for("run 2 of 2: ");
    let (status, _, stderr) = charm.interrupt(std::time::Duration::from_millis(500));
    assert_eq!(status.code(), Some(130), "{status}: {stderr}");
    assert!(
        stderr.contains("run 2 of 2: interrupted (Ctrl-C or SIGTERM): left out; 1 run made"),
        "{stderr}"
    );
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("charm.json")).unwrap()).unwrap();
    assert_eq!(
        json["interrupted"],
        serde_json::json!({"during_run": 2, "of": 2}),
        "{json}"
    );
    let runs = json["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{json}");
    assert!(runs[0]["tpmc"].as_f64().unwrap() > 0.0, "{json}");
    let md = std::fs::read_to_string(out.join("charm.md")).unwrap();
    assert!(
        md.contains("**Interrupted** (Ctrl-C or SIGTERM) during run 2 of 2"),
        "{md}"
    );
}

#[test]
fn bad_options_are_refused_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("results");
    for (args, expected) in [
        (&["--threads-list", ","][..], "--threads-list"),
        (&["--threads-list", "2,zero"][..], "--threads-list"),
        (&["--threads-list", "0"][..], "--threads-list"),
        (&["--skip", "table9"][..], "--skip"),
        (&["--warehouses", "0"][..], "--warehouses"),
        (&["--read-us", "0"][..], "--read-us"),
        (&["--duration", "0"][..], "--duration"),
        (&["--rounds", "0"][..], "--rounds"),
    ] {
        let mut all = vec!["charm", "--out", path(&out)];
        all.extend(args);
        let run = glass(&all);
        let stderr = text(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
    }
    assert!(!out.exists(), "a refused command wrote {}", out.display());
}
