//! The `glass` command's contract: usage errors are one line naming the bad value (exit 2),
//! `bench` prints and writes its result, `load` then `check` round-trips through a directory.

use std::path::Path;
use std::process::Output;

mod common;
use common::{glass, read_json};

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Asserts a usage error: exit code 2, one line on stderr containing every `needle`.
/// The command exited 0; else its output, both streams, is the failure's message.
fn assert_success(out: &Output) {
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(out), stderr(out));
}

fn assert_usage_error(args: &[&str], needles: &[&str]) {
    let out = glass(args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "{args:?}: not one line: {err}"
    );
    for needle in needles {
        assert!(
            err.contains(needle),
            "{args:?}: '{needle}' missing from: {err}"
        );
    }
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_flags_and_values_are_one_line_errors_naming_them() {
    assert_usage_error(
        &["bench", "tpcx"],
        &["tpcx", "tpcc", "tpcb", "ycsb", "voter"],
    );
    assert_usage_error(
        &["bench", "tpcb", "--preset", "fast"],
        &["fast", "full", "stripped", "optimal"],
    );
    assert_usage_error(
        &["bench", "tpcb", "--switch", "locks=off"],
        &["locks", "locking", "btree-keys"],
    );
    assert_usage_error(
        &["bench", "tpcb", "--switch", "locking=maybe"],
        &["locking=maybe", "NAME=off"],
    );
    assert_usage_error(&["bench", "tpcb", "--bogus"], &["--bogus"]);
    assert_usage_error(&["bench", "tpcb", "--rounds", "0"], &["--rounds", "0"]);
    assert_usage_error(&["bench", "tpcb", "--threads", "0"], &["--threads", "0"]);
    assert_usage_error(
        &["bench", "tpcb", "--threads", "many"],
        &["--threads", "many"],
    );
    assert_usage_error(
        &["bench", "tpcb", "--duration", "-3"],
        &["--duration", "-3"],
    );
    assert_usage_error(&["bench", "tpcb", "--duration", "nan"], &["--duration"]);
    assert_usage_error(
        &["bench", "tpcb", "--duration", "5", "--txns", "10"],
        &["--duration", "--txns"],
    );
    assert_usage_error(
        &["bench", "ycsb", "--ycsb-workload", "G"],
        &["--ycsb-workload", "A, B, C, D, E, F"],
    );
    assert_usage_error(
        &["bench", "ycsb", "--distribution", "pareto"],
        &["pareto", "uniform", "zipfian", "latest"],
    );
    assert_usage_error(
        &["bench", "tpcc", "--mix", "half"],
        &["half", "full", "paper"],
    );
    assert_usage_error(&["bench", "tpcc", "--scale", "0"], &["--scale", "0"]);
    assert_usage_error(&["load", "tpcb"], &["--db"]);
    assert_usage_error(&["frobnicate"], &["frobnicate"]);
}

#[test]
fn impossible_configurations_are_refused_before_anything_runs() {
    // More than one thread without locks or latches.
    assert_usage_error(
        &["bench", "tpcb", "--switch", "locking=off", "--threads", "2"],
        &["locking=off", "one thread"],
    );
    assert_usage_error(
        &["bench", "tpcb", "--preset", "stripped", "--threads", "4"],
        &["one thread"],
    );
    assert_usage_error(
        &["bench", "tpcb", "--switch", "lsn=off", "--threads", "1"],
        &["lsn=off", "main-log=off"],
    );
    // The hand-coded kernel runs TPC-C's paper mix, on one thread, and has no switches.
    assert_usage_error(
        &["bench", "tpcb", "--preset", "optimal", "--threads", "1"],
        &["optimal", "tpcc --mix paper"],
    );
    assert_usage_error(
        &["bench", "tpcc", "--preset", "optimal", "--threads", "1"],
        &["optimal", "--mix paper"],
    );
    assert_usage_error(
        &["bench", "tpcc", "--mix", "paper", "--preset", "optimal"],
        &["optimal kernel is single-threaded"],
    );
    assert_usage_error(
        &["profile", "tpcc", "--preset", "optimal"],
        &["glass profile needs the engine"],
    );
}

/// A run in memory has no page file to clean and no log file to sync: those options are
/// refused, not ignored. Given `--db`, they are accepted (the run's JSON records them).
#[test]
fn file_options_without_a_database_directory_are_refused() {
    for (flag, value) in [
        ("--page-cleaners", "2"),
        ("--log-sync", "dsync"),
        ("--log-prealloc-mib", "0"),
        ("--log-segment-mib", "4"),
        ("--full-page-images", "on"),
        ("--doublewrite", "off"),
    ] {
        assert_usage_error(&["bench", "tpcb", flag, value], &[flag, "--db DIR"]);
        assert_usage_error(
            &["serve", "tpcb", "--unix", "/nonexistent/s", flag, value],
            &[flag],
        );
        assert_usage_error(&["profile", "tpcb", flag, value], &[flag]);
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let json = dir.path().join("run.json");
    let out = glass(&[
        "bench",
        "tpcb",
        "--db",
        db.to_str().unwrap(),
        "--page-cleaners",
        "1",
        "--log-sync",
        "dsync",
        "--full-page-images",
        "on",
        "--log-segment-mib",
        "4",
        "--txns",
        "200",
        "--warmup",
        "0",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_success(&out);
    let report = read_json(&json);
    assert_eq!(report["page_cleaners"], 1, "{report}");
    assert_eq!(report["log_sync"], "dsync", "{report}");
    assert_eq!(report["log_segment_mib"], 4, "{report}");
    assert_eq!(report["full_page_images"], true, "{report}");
    assert!(
        stdout(&out).contains(" log-segment-mib=4"),
        "{}",
        stdout(&out)
    );
    assert!(
        stdout(&out).contains(" full-page-images"),
        "{}",
        stdout(&out)
    );
    // Every page is clean after the open: each one's first change logged its image.
    let images = report["pool"]["image_bytes"].as_u64().unwrap();
    assert!(images >= 8000, "{report}");
    assert!(
        stdout(&out).contains("full-page images: ") && stdout(&out).contains("% of the "),
        "{}",
        stdout(&out)
    );
}

/// `glass bench tpcb` on `db` with a 1 MiB pool (its pages written back all along), `txns`
/// transactions, no warm-up and `extra` flags: its output and its JSON report, from `json`.
fn small_pool_tpcb(
    db: &Path,
    json: &Path,
    txns: &str,
    extra: &[&str],
) -> (Output, serde_json::Value) {
    let mut args = vec![
        "bench",
        "tpcb",
        "--db",
        db.to_str().unwrap(),
        "--pool-mib",
        "1",
        "--txns",
        txns,
        "--warmup",
        "0",
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = glass(&args);
    assert_success(&out);
    (out, read_json(json))
}

/// `--doublewrite` needs a page file too; given one, a durable run writes its pages through
/// the file by default and logs no full-page images in its stead, and the report says so;
/// with `--doublewrite off` it logs images instead.
#[test]
fn a_durable_run_goes_through_the_doublewrite_file_by_default_and_logs_no_images() {
    assert_usage_error(
        &["bench", "tpcb", "--doublewrite"],
        &["--doublewrite", "--db DIR"],
    );
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let json = dir.path().join("run.json");
    let durable_run = |txns: &str, extra: &[&str]| {
        let durable = ["--durable", "--checkpoint-kib", "256"];
        small_pool_tpcb(&db, &json, txns, &[&durable[..], extra].concat())
    };
    let (out, report) = durable_run("2000", &[]);
    assert_eq!(report["doublewrite"], true, "{report}");
    assert_eq!(report["full_page_images"], false, "{report}");
    assert_eq!(report["pool"]["image_bytes"], 0, "{report}");
    let pages = report["pool"]["doublewrite_pages"].as_u64().unwrap();
    let batches = report["pool"]["doublewrite_batches"].as_u64().unwrap();
    assert!(pages > 0 && batches > 0 && pages >= batches, "{report}");
    // The close syncs the page file at least once; a round of the ring at most once a batch.
    let syncs = report["pool"]["doublewrite_page_file_syncs"]
        .as_u64()
        .unwrap();
    assert!(syncs >= 1 && syncs <= batches, "{report}");
    let text = stdout(&out);
    assert!(text.contains(" doublewrite "), "{text}");
    assert!(
        text.contains(&format!(
            "doublewrite: {pages} page writes went through the doublewrite file first, in \
             {batches} batches"
        )),
        "{text}"
    );
    assert!(db.join("doublewrite.db").exists());

    // Without the file, the same durable run logs images (and the open empties the file).
    let (_, report) = durable_run("500", &["--doublewrite", "off"]);
    assert_eq!(report["doublewrite"], false, "{report}");
    assert_eq!(report["full_page_images"], true, "{report}");
    assert!(
        report["pool"]["image_bytes"].as_u64().unwrap() > 0,
        "{report}"
    );
    assert_eq!(report["pool"]["doublewrite_batches"], 0, "{report}");
    assert_eq!(
        std::fs::metadata(db.join("doublewrite.db")).unwrap().len(),
        0
    );
}

/// The doublewrite file's ring: 16 MiB for a database whose page file is under 64 MiB, the
/// length `--doublewrite-ring-mib` gives in whole slots of 2 MiB otherwise; the flag is refused
/// where there is no doublewrite file to size.
#[test]
fn the_doublewrite_ring_has_the_length_given_or_one_sized_by_the_page_file() {
    assert_usage_error(
        &["bench", "tpcb", "--doublewrite-ring-mib", "4"],
        &["--doublewrite-ring-mib", "--db DIR"],
    );
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let json = dir.path().join("run.json");
    assert_usage_error(
        &[
            "bench",
            "tpcb",
            "--db",
            db.to_str().unwrap(),
            "--doublewrite",
            "off",
            "--doublewrite-ring-mib",
            "4",
        ],
        &["--doublewrite-ring-mib", "--doublewrite off"],
    );
    let run = |extra: &[&str]| {
        let (out, report) = small_pool_tpcb(&db, &json, "1000", extra);
        (stdout(&out), report)
    };
    let slots_len = |slots: u64| slots * (1 + 256) * 8192;
    let (_, report) = run(&[]);
    assert_eq!(
        report["pool"]["doublewrite_ring_bytes"],
        16 << 20,
        "{report}"
    );
    assert_eq!(
        std::fs::metadata(db.join("doublewrite.db")).unwrap().len(),
        slots_len(8)
    );
    // 5 MiB is two whole slots.
    let (text, report) = run(&["--doublewrite-ring-mib", "5"]);
    assert_eq!(
        report["pool"]["doublewrite_ring_bytes"],
        4 << 20,
        "{report}"
    );
    assert!(text.contains("to a ring of 4 MiB"), "{text}");
    assert_eq!(
        std::fs::metadata(db.join("doublewrite.db")).unwrap().len(),
        slots_len(2)
    );
}

/// With `--server` the engine is the server's: an engine option given to the client would
/// label the report with a configuration the run did not have, so it is refused (before any
/// connection: the address here has no server). `--durable` (the receipts are durable ones)
/// and `--no-prefetch` (the interactive client reads nothing ahead) are the client's own.
#[test]
fn engine_options_given_to_a_client_of_a_server_are_refused() {
    let server = ["bench", "tpcb", "--server", "127.0.0.1:1", "--txns", "10"];
    for option in [
        &["--pool-mib", "5"][..],
        &["--db", "/tmp/never-made"],
        &["--switch", "locking=off"],
        &["--preset", "stripped"],
        &["--log-sync", "dsync"],
        &["--page-locking"],
    ] {
        let args: Vec<&str> = server.iter().chain(option).copied().collect();
        assert_usage_error(&args, &[option[0], "glass serve"]);
    }
    // The handoffs are counted in this process's pool, which a client does not use.
    let handoffs: Vec<&str> = server.iter().copied().chain(["--handoffs"]).collect();
    assert_usage_error(&handoffs, &["--handoffs", "--server"]);
    for option in ["--durable", "--no-prefetch"] {
        let args: Vec<&str> = server.iter().copied().chain([option]).collect();
        let out = glass(&args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{option}: {err}");
        assert!(err.contains("connect"), "{option}: {err}");
    }
}

#[test]
fn check_of_a_directory_never_loaded_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    assert_usage_error(&["check", "tpcb", "--db", path], &["glass load tpcb", path]);
}

#[test]
fn help_and_version_exit_zero() {
    let out = glass(&["--version"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains(env!("CARGO_PKG_VERSION")));
    let out = glass(&["bench", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    for flag in [
        "--scale",
        "--threads",
        "--duration",
        "--txns",
        "--warmup",
        "--preset",
        "--switch",
        "--mix",
        "--db",
        "--durable",
        "--pool-mib",
        "--seed",
        "--json",
        "--ycsb-workload",
        "--distribution",
    ] {
        assert!(stdout(&out).contains(flag), "help lacks {flag}");
    }
}

fn assert_result_json(path: &Path, workload: &str, txns: u64) {
    let json = read_json(path);
    for key in [
        "workload",
        "mix",
        "preset",
        "switches",
        "scale",
        "threads",
        "duration_s",
        "txn_count",
        "tps",
        "p50_us",
        "p90_us",
        "p99_us",
        "p999_us",
        "max_us",
        "aborts",
        "rollbacks",
        "consistency",
        "by_type",
        "seed",
        "durable",
        "pool_mib",
        "glass_version",
        "timestamp",
    ] {
        assert!(json.get(key).is_some(), "missing {key} in {json}");
    }
    assert_eq!(json["workload"], workload);
    assert_eq!(json["txn_count"], txns);
    assert_eq!(json["consistency"], "ok", "{json}");
    // What the rest of the machine took of the CPUs meanwhile, a share.
    let others = json["others_cpu_share"].as_f64().expect("others_cpu_share");
    assert!((0.0..=1.0).contains(&others), "{json}");
    let by_type = json["by_type"].as_object().expect("by_type is an object");
    assert!(!by_type.is_empty());
    let sum: u64 = by_type.values().map(|t| t["count"].as_u64().unwrap()).sum();
    assert_eq!(sum, txns);
    for t in by_type.values() {
        for key in ["count", "tps", "p50_us", "p99_us", "aborts"] {
            assert!(t.get(key).is_some(), "missing by_type.{key} in {t}");
        }
    }
}

#[test]
fn bench_tpcb_end_to_end_writes_every_field() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let out = glass(&[
        "bench",
        "tpcb",
        "--txns",
        "200",
        "--threads",
        "2",
        "--warmup",
        "0",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_success(&out);
    let printed = stdout(&out);
    assert!(printed.contains("total"), "{printed}");
    assert!(printed.contains("consistency: ok"), "{printed}");
    assert!(printed.contains("config: workload=tpcb"), "{printed}");
    assert_result_json(&json, "tpcb", 200);
}

/// `--no-prefetch` and `--huge-pages` reach the engine's configuration and the result:
/// recorded in the JSON and on the config line, where a run with the defaults says nothing.
#[test]
fn engine_flags_are_recorded_in_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let flags = [
        (None, [true, false]),
        (Some("--no-prefetch"), [false, false]),
        (Some("--huge-pages"), [true, true]),
    ];
    for (i, (flag, [prefetch, huge_pages])) in flags.into_iter().enumerate() {
        let json = dir.path().join(format!("{i}.json"));
        let mut args = vec![
            "bench",
            "tpcb",
            "--threads",
            "1",
            "--txns",
            "100",
            "--warmup",
            "0",
            "--json",
            json.to_str().unwrap(),
        ];
        args.extend(flag);
        let out = glass(&args);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_result_json(&json, "tpcb", 100);
        let result = read_json(&json);
        assert_eq!(result["prefetch"], prefetch, "{flag:?}");
        assert_eq!(result["huge_pages"], huge_pages, "{flag:?}");
        assert_eq!(stdout(&out).contains("prefetch=off"), !prefetch, "{flag:?}");
        assert_eq!(
            stdout(&out).contains("huge-pages=on"),
            huge_pages,
            "{flag:?}"
        );
    }
}

#[test]
fn load_then_check_then_bench_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let db = db.to_str().unwrap();
    let out = glass(&["load", "tpcb", "--db", db, "--scale", "2"]);
    assert_success(&out);

    // Loading twice is refused rather than duplicating rows.
    assert_usage_error(&["load", "tpcb", "--db", db], &["already holds", "tpcb"]);
    // The scale is remembered; another scale or workload is refused.
    assert_usage_error(
        &["bench", "tpcb", "--db", db, "--scale", "3", "--txns", "5"],
        &["--scale 2"],
    );
    assert_usage_error(&["check", "voter", "--db", db], &["tpcb database"]);

    let out = glass(&["check", "tpcb", "--db", db]);
    let printed = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{printed}{}", stderr(&out));
    assert!(printed.contains('✓'), "{printed}");
    assert!(!printed.contains('✗'), "{printed}");

    let json = dir.path().join("run.json");
    let out = glass(&[
        "bench",
        "tpcb",
        "--db",
        db,
        "--txns",
        "50",
        "--threads",
        "1",
        "--warmup",
        "0",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_success(&out);
    assert_result_json(&json, "tpcb", 50);
    // Without --scale, the run adopts the scale the directory was loaded with.
    let result = read_json(&json);
    assert_eq!(result["scale"], 2);
    assert!(result["load_s"].is_null(), "{result}");

    // The runs below: 2,000 TPC-B transactions on two threads in that directory.
    let tpcb_run = [
        "bench",
        "tpcb",
        "--db",
        db,
        "--txns",
        "2000",
        "--threads",
        "2",
        "--warmup",
        "0",
        "--json",
        json.to_str().unwrap(),
    ];
    // Checkpoints every 16 KiB of log, in the commits and then on the checkpointer thread:
    // the report counts each where it was taken, and the database checks clean after both.
    for (flags, field) in [
        (&[][..], "in_commits"),
        (&["--background-checkpoints"][..], "background"),
    ] {
        let out = glass(&[&tpcb_run[..], &["--checkpoint-kib", "16"], flags].concat());
        assert_success(&out);
        assert!(stdout(&out).contains("checkpoints: "), "{}", stdout(&out));
        let result = read_json(&json);
        let other = if field == "background" {
            "in_commits"
        } else {
            "background"
        };
        assert!(
            result["checkpoints"][field].as_u64().unwrap() > 0,
            "{result}"
        );
        assert_eq!(result["checkpoints"][other], 0, "{result}");
    }

    // Page cleaners beside a pool far smaller than the data: the run records them, its
    // pool counts whose writes were whose, and the database checks clean after.
    let out = glass(&[&tpcb_run[..], &["--pool-mib", "1", "--page-cleaners", "2"]].concat());
    assert_success(&out);
    assert!(stdout(&out).contains("page-cleaners=2"), "{}", stdout(&out));
    let result = read_json(&json);
    assert_eq!(result["page_cleaners"], 2, "{result}");
    let pool = &result["pool"];
    let writes = pool["writes"].as_u64().unwrap();
    let by_misses = pool["evict_writes"].as_u64().unwrap();
    let by_cleaners = pool["cleaner_writes"].as_u64().unwrap();
    assert!(
        by_misses + by_cleaners > 0,
        "a 1 MiB pool evicted nothing: {pool}"
    );
    assert!(by_misses + by_cleaners <= writes, "{pool}");

    let out = glass(&["check", "tpcb", "--db", db]);
    assert_success(&out);
}

#[test]
fn a_log_damaged_in_its_middle_is_refused_unless_the_loss_is_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let out = glass(&["load", "tpcb", "--db", db.to_str().unwrap(), "--scale", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Flip a checksum bit of the last checkpoint's begin record (the master record names it,
    // bytes 8..16); its end record follows intact.
    let master = std::fs::read(db.join("wal.log.master")).unwrap();
    let begin = u64::from_le_bytes(master[8..16].try_into().unwrap());
    let mut log = std::fs::read(db.join("wal.log")).unwrap();
    log[begin as usize + 4] ^= 0x40;
    std::fs::write(db.join("wal.log"), &log).unwrap();

    let path = db.to_str().unwrap();
    let out = glass(&["check", "tpcb", "--db", path]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{}{err}", stdout(&out));
    assert!(err.contains(&format!("log record at lsn:{begin}")), "{err}");
    assert!(err.contains("--accept-log-loss"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(
        std::fs::read(db.join("wal.log")).unwrap(),
        log,
        "the log changed"
    );

    let out = glass(&["check", "tpcb", "--db", path, "--accept-log-loss"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{}{err}", stdout(&out));
    assert!(err.contains("warning"), "{err}");
    assert!(err.contains(&format!("lsn:{begin}")), "{err}");
    // Cut, the log opens without the flag, silently.
    let out = glass(&["check", "tpcb", "--db", path]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
}

#[test]
fn accept_log_loss_needs_a_database() {
    assert_usage_error(&["bench", "tpcb", "--accept-log-loss"], &["--db"]);
}

/// An error's cause is printed once, however many layers carry it (the log's I/O error was
/// printed twice, "Is a directory (os error 21): Is a directory (os error 21)").
#[test]
fn an_errors_cause_is_printed_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let db_arg = db.to_str().unwrap();
    let out = glass(&["load", "tpcb", "--db", db_arg]);
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::remove_file(db.join("wal.log")).unwrap();
    std::fs::create_dir(db.join("wal.log")).unwrap();
    let out = glass(&["check", "tpcb", "--db", db_arg]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("wal.log is not a regular file"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // Where the database is opened as it is (bench on a loaded database creates nothing
    // either), the OS's own words appear once.
    let out = glass(&["bench", "tpcb", "--db", db_arg, "--txns", "5"]);
    let err = stderr(&out);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.matches("os error 21").count() <= 1, "{err}");
}

#[test]
fn an_in_memory_run_that_outgrows_its_pool_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let run = |pool: &[&str]| {
        let mut args = vec![
            "bench",
            "tpcb",
            "--scale",
            "1",
            "--txns",
            "3000",
            "--threads",
            "1",
            "--warmup",
            "0",
            "--json",
            json.to_str().unwrap(),
        ];
        args.extend_from_slice(pool);
        let out = glass(&args);
        assert_success(&out);
        let result = read_json(&json);
        (stdout(&out), result)
    };
    // A 1 MiB pool holds a few of TPC-B's pages: the run reads pages back and writes them out.
    let (printed, result) = run(&["--pool-mib", "1"]);
    assert!(
        printed.contains("the data outgrew the 1 MiB pool"),
        "{printed}"
    );
    assert!(result["pool"]["reads"].as_u64().unwrap() > 0, "{result}");
    assert!(result["pool"]["writes"].as_u64().unwrap() > 0, "{result}");
    assert_eq!(result["pool"]["in_memory"], true, "{result}");
    // The default pool holds the database and what the run adds: no page moves.
    let (printed, result) = run(&[]);
    assert!(!printed.contains("pool: "), "{printed}");
    assert_eq!(result["pool"]["reads"], 0, "{result}");
    assert_eq!(result["pool"]["writes"], 0, "{result}");
}

/// Starts `glass bench ARGS` with its outputs in `dir`, waits until it has begun to run
/// transactions and a second more, sends it SIGINT (as Ctrl-C does), and returns its exit
/// status, stdout and stderr.
fn bench_interrupted(dir: &Path, args: &[&str]) -> (std::process::ExitStatus, String, String) {
    let mut bench = common::Running::start(dir, &[&["bench"], args].concat());
    bench.wait_for("running ");
    bench.interrupt(std::time::Duration::from_secs(1))
}

/// Ctrl-C ends a long run where it is and the run finishes as it would have: its table over
/// the time measured, saying so, its check, its database closed (the next open recovers
/// nothing), exit status 130. Without a handler it died at once and printed nothing.
#[test]
fn ctrl_c_ends_a_bench_with_its_figures_so_far() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let json = dir.path().join("run.json");
    let (status, out, err) = bench_interrupted(
        dir.path(),
        &[
            "tpcb",
            "--db",
            db.to_str().unwrap(),
            "--duration",
            "600",
            "--warmup",
            "0",
            "--rounds",
            "3",
            "--threads",
            "2",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    assert_eq!(status.code(), Some(130), "{status}: {out}{err}");
    assert!(out.contains("interrupted: the figures cover the"), "{out}");
    assert!(out.contains("consistency: ok"), "{out}");
    let result = read_json(&json);
    assert_eq!(result["interrupted"], true);
    assert_eq!(
        result["rounds"].as_array().unwrap().len(),
        1,
        "no round after"
    );
    let measured = result["duration_s"].as_f64().unwrap();
    assert!(measured > 0.5 && measured < 120.0, "{measured}");
    assert!(result["txn_count"].as_u64().unwrap() > 0);
    // Closed cleanly: the next open had nothing to redo or undo.
    let check = glass(&["check", "tpcb", "--db", db.to_str().unwrap()]);
    assert_success(&check);
    let checked = stdout(&check);
    assert!(
        checked.contains(" 0 page changes redone")
            && checked.contains(" 0 unfinished transactions rolled back"),
        "{checked}"
    );
}

/// Ctrl-C during the warm-up: nothing was measured, and it says so.
#[test]
fn ctrl_c_in_a_benchs_warm_up_says_nothing_was_measured() {
    let dir = tempfile::tempdir().unwrap();
    let (status, out, err) =
        bench_interrupted(dir.path(), &["tpcb", "--duration", "10", "--warmup", "600"]);
    assert_eq!(status.code(), Some(1), "{status}: {out}{err}");
    assert!(
        err.contains("interrupted during the warm-up: nothing was measured"),
        "{err}"
    );
}
