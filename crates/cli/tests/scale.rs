//! `glass scale`: a short sweep writes a point per configuration and thread count (JSON, tables,
//! status lines, the figure with its linear lines) and removes its durable databases; bad
//! flags are refused in one line before anything runs.

use std::time::{Duration, Instant};

mod common;
use common::{glass, path, read_json, running_with, text, Running};

#[test]
fn a_sweep_measures_every_configuration_at_every_thread_count() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("figures");
    // Into the figures' directory, which the sweep creates before it checks --json.
    let json = out.join("scale.json");
    let dir = tmp.path().join("databases");
    let run = glass(&[
        "scale",
        "tpcb",
        "--threads",
        "1,2",
        "--duration",
        "0.5",
        "--warmup",
        "0",
        "--json",
        path(&json),
        "--out",
        path(&out),
        "--dir",
        path(&dir),
    ]);
    let (stdout, stderr) = (text(&run.stdout), text(&run.stderr));
    assert_eq!(run.status.code(), Some(0), "{stdout}\n{stderr}");

    let result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(result["cores"].as_u64().unwrap() >= 1, "{result}");
    assert!(
        result["command"].as_str().unwrap().contains("scale tpcb"),
        "{result}"
    );
    let points = result["points"].as_array().unwrap();
    let configs = ["partitioned", "shared", "durable"];
    assert_eq!(points.len(), configs.len() * 2, "{result}");
    for config in configs {
        let at = |threads: u64| {
            points
                .iter()
                .find(|p| p["config"] == config && p["threads"] == threads)
                .unwrap_or_else(|| panic!("no {config} point at {threads} threads: {result}"))
        };
        let (one, two) = (at(1), at(2));
        for p in [one, two] {
            assert!(p["tps"].as_f64().unwrap() > 0.0, "{p}");
            assert_eq!(p["consistency"], "ok", "{p}");
            assert_eq!(p["runs"].as_array().map(Vec::len), Some(1), "{p}");
            assert_eq!(p["runs"][0]["threads"], p["threads"], "{p}");
        }
        assert_eq!(one["speedup"], 1.0, "{one}");
        assert_eq!(one["efficiency"], 1.0, "{one}");
        let (tps1, tps2) = (one["tps"].as_f64().unwrap(), two["tps"].as_f64().unwrap());
        let speedup = two["speedup"].as_f64().unwrap();
        assert!((speedup - tps2 / tps1).abs() < 1e-9, "{two}");
        assert!(
            (two["linear_tps"].as_f64().unwrap() - 2.0 * tps1).abs() < 1e-6,
            "{two}"
        );
    }
    // Partitioned and durable give each thread a branch; shared keeps one for all.
    let scale_of = |config: &str, threads: u64| {
        points
            .iter()
            .find(|p| p["config"] == config && p["threads"] == threads)
            .map(|p| p["scale"].as_u64().unwrap())
    };
    assert_eq!(scale_of("partitioned", 2), Some(2));
    assert_eq!(scale_of("durable", 2), Some(2));
    assert_eq!(scale_of("shared", 2), Some(1));
    for p in points {
        let durable = p["config"] == "durable";
        assert_eq!(p["runs"][0]["durable"], durable, "{p}");
        assert_eq!(p["forces_per_commit"].is_number(), durable, "{p}");
    }

    // A table per configuration, a status line per point.
    for config in configs {
        assert!(stdout.contains(&format!("TPC-B {config}:")), "{stdout}");
    }
    assert!(stdout.contains("forces/commit"), "{stdout}");
    for i in 1..=6 {
        assert!(stderr.contains(&format!("[{i}/6] tpcb ")), "{stderr}");
    }

    // The figure, with a dashed linear line per configuration.
    let svg = std::fs::read_to_string(out.join("scale-tpcb.svg")).unwrap();
    for config in configs {
        assert!(
            svg.contains(&format!("linear ({config})")),
            "no linear line for {config}"
        );
    }
    // Dashes are short thin segments: many of them, against one solid line per configuration.
    let dashes = svg
        .lines()
        .filter(|l| l.starts_with("<polyline") && l.contains("stroke-width=\"2\""))
        .count();
    assert!(dashes >= 10, "{dashes} dashes in the SVG");
    assert!(svg.contains("TPC-B throughput against threads"), "no title");
    assert!(out.join("scale-tpcb.png").metadata().unwrap().len() > 0);

    // The durable databases went with their temporary directory.
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert!(left.is_empty(), "{left:?} left in {}", dir.display());
}

#[test]
fn processes_run_beside_the_threads_of_one_process() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("scale.json");
    let run = glass(&[
        "scale",
        "tpcb",
        "--configs",
        "processes,partitioned",
        "--threads",
        "1,2",
        "--duration",
        "0.4",
        "--warmup",
        "0.2",
        "--rounds",
        "2",
        "--json",
        path(&json),
        "--out",
        path(&tmp.path().join("figures")),
    ]);
    let (stdout, stderr) = (text(&run.stdout), text(&run.stderr));
    assert_eq!(run.status.code(), Some(0), "{stdout}\n{stderr}");
    let result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(
        result["configs"],
        serde_json::json!(["partitioned", "processes"])
    );
    let points = result["points"].as_array().unwrap();
    for threads in [1u64, 2] {
        let p = points
            .iter()
            .find(|p| p["config"] == "processes" && p["threads"] == threads)
            .unwrap_or_else(|| panic!("no processes point at {threads}: {result}"));
        // Each process on a branch of its own; no run of the sweep's own machinery.
        assert_eq!(p["scale"], 1, "{p}");
        assert_eq!(p["consistency"], "ok", "{p}");
        assert_eq!(p["runs"].as_array().map(Vec::len), Some(0), "{p}");
        let rounds = p["processes"].as_array().unwrap();
        assert_eq!(rounds.len(), 2, "{p}");
        let mut sums = Vec::new();
        for round in rounds {
            let each = round.as_array().unwrap();
            assert_eq!(each.len() as u64, threads, "{p}");
            for process in each {
                assert!(process["tps"].as_f64().unwrap() > 0.0, "{p}");
                assert_eq!(process["consistency"], "ok", "{p}");
                assert!(process["load_s"].as_f64().unwrap() > 0.0, "{p}");
            }
            sums.push(each.iter().map(|e| e["tps"].as_f64().unwrap()).sum::<f64>());
        }
        // The point's throughput is the median (here the mean) of the rounds' sums.
        let tps = p["tps"].as_f64().unwrap();
        assert!((tps - (sums[0] + sums[1]) / 2.0).abs() < 1e-6, "{p}");
    }
    assert!(
        stdout.contains("TPC-B processes: one process of one thread per branch"),
        "{stdout}"
    );
    assert!(
        stdout.contains("nothing shared but the machine"),
        "{stdout}"
    );
    assert!(stderr.contains("tpcb processes at 2 threads"), "{stderr}");
}

/// Ctrl-C ends a sweep in order: the point then running (here two processes of a `processes`
/// point, which the sweep passes the signal on to) is left out, the points before it are
/// reported, the JSON says it was interrupted, nothing it started runs on, and it exits 130.
/// Without a handler it died at once, reported nothing and left its processes running.
#[test]
fn ctrl_c_ends_a_sweep_with_the_points_run_before_it() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("scale.json");
    let dir = tmp.path().join("databases");
    let figures = tmp.path().join("figures");
    let mut sweep = Running::start(
        tmp.path(),
        &[
            "scale",
            "tpcb",
            "--configs",
            "partitioned,processes",
            "--threads",
            "2",
            "--duration",
            "2",
            "--warmup",
            "0",
            "--rounds",
            "2",
            "--json",
            path(&json),
            "--out",
            path(&figures),
            "--dir",
            path(&dir),
        ],
    );
    // The first point (partitioned) ended: the second, two processes, starts.
    sweep.wait_for("[1/4]");
    let (status, stdout, stderr) = sweep.interrupt(Duration::from_millis(500));
    assert_eq!(status.code(), Some(130), "{status}: {stdout}\n{stderr}");
    assert!(
        stderr.contains("[2/4] interrupted: processes at 2 threads, round 1, left out"),
        "{stderr}"
    );
    assert!(
        stdout.contains("interrupted (Ctrl-C or SIGTERM): 1 of 4 points run"),
        "{stdout}"
    );
    assert!(stdout.contains("(1 of 2 rounds)"), "{stdout}");
    let result = read_json(&json);
    assert_eq!(result["interrupted"], true, "{result}");
    assert_eq!(result["points_run"], 1, "{result}");
    assert_eq!(result["points_planned"], 4, "{result}");
    let points = result["points"].as_array().unwrap();
    assert_eq!(points.len(), 1, "{result}");
    assert_eq!(points[0]["config"], "partitioned", "{result}");
    assert!(points[0]["tps"].as_f64().unwrap() > 0.0, "{result}");
    // The processes (started with the sweep's own arguments, --dir among them) ended too.
    let started = Instant::now();
    while running_with(path(&dir)) {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "a process of the sweep runs on"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Asserts a usage error: exit code 2 at once, one line on stderr containing every `needle`.
fn assert_refused(args: &[&str], needles: &[&str]) {
    let started = Instant::now();
    let out = glass(args);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    for needle in needles {
        assert!(err.contains(needle), "{args:?}: '{needle}' missing: {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{args:?} ran before refusing"
    );
}

#[test]
fn bad_flags_are_refused_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("figures");
    let scale = |more: &[&'static str]| -> Vec<String> {
        let mut args = vec!["scale".to_string()];
        args.extend(more.iter().map(|s| s.to_string()));
        args.extend(["--out".to_string(), path(&out).to_string()]);
        args
    };
    let refused = |more: &[&'static str], needles: &[&str]| {
        let args = scale(more);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_refused(&args, needles);
    };
    refused(&["tpcb", "--threads", "0"], &["--threads 0", "at least 1"]);
    refused(&["tpcb", "--threads", "1,0,2"], &["--threads 1,0,2"]);
    refused(&["tpcb", "--threads", "1,x"], &["'x'", "1,2,4,8"]);
    refused(&["tpcb", "--threads", "9000"], &["4096"]);
    refused(
        &["tpcb", "--configs", "fast"],
        &["'fast'", "partitioned, shared, durable"],
    );
    refused(
        &["ycsb", "--configs", "shared"],
        &["'shared' does not apply to ycsb", "embedded, durable"],
    );
    refused(
        &["tpcc", "--configs", "embedded"],
        &["'embedded' does not apply to tpcc"],
    );
    refused(&["tpcb", "--scale", "4"], &["--scale 4", "--shared-scale"]);
    refused(
        &["tpcb", "--configs", "partitioned", "--shared-scale", "2"],
        &["--shared-scale 2", "shared"],
    );
    refused(
        &["tpcb", "--threads", "1,2", "--switch", "locking=off"],
        &["locking=off", "not 2"],
    );
    refused(
        &["tpcb", "--configs", "durable", "--switch", "disk-log=off"],
        &["disk-log=off", "durable"],
    );
    refused(&["tpcc", "--preset", "optimal"], &["optimal", "one thread"]);
    // Processes run at once: their pools add up, and 4096 of them fit no machine here.
    refused(
        &["tpcc", "--configs", "processes", "--threads", "1,4096"],
        &["processes at 4096 threads", "together"],
    );
    refused(
        &["ycsb", "--configs", "processes"],
        &["'processes' does not apply to ycsb"],
    );
    refused(&["tpcb", "--duration", "0"], &["--duration"]);
    refused(&["tpcb", "--rounds", "0"], &["--rounds"]);
    refused(
        &["tpcb", "--json", "/nonexistent-glass-dir/scale.json"],
        &["--json", "/nonexistent-glass-dir/scale.json"],
    );
}
