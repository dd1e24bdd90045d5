//! What `glass` must refuse before it writes or runs anything: directories holding data it does
//! not recognise, sizes the workload or the machine cannot hold, a `--json` it cannot write,
//! `--durable` with nothing to force; and the warning of a database on disk run without its log.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `glass args` with `TMPDIR` set to `tmp` (if given); a run still going after a generous
/// limit is killed and fails the test (it hangs rather than refusing).
fn glass_in(args: &[&str], tmp: Option<&Path>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_glass"));
    command
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(tmp) = tmp {
        command.env("TMPDIR", tmp);
    }
    let mut child = command.spawn().expect("run the glass binary");
    let started = Instant::now();
    while child.try_wait().expect("wait for glass").is_none() {
        if started.elapsed() > Duration::from_secs(300) {
            let _ = child.kill();
            panic!("glass {args:?} still running after 300 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("collect glass's output")
}

fn glass(args: &[&str]) -> Output {
    glass_in(args, None)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts a usage error: exit code 2, one line on stderr containing every `needle`.
fn assert_refused(args: &[&str], needles: &[&str]) -> String {
    let out = glass(args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    for needle in needles {
        assert!(err.contains(needle), "{args:?}: '{needle}' missing: {err}");
    }
    err
}

/// Every file of `dir` with its bytes.
fn contents(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

#[test]
fn profile_refuses_another_workloads_database_and_leaves_it_alone() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("voter-db");
    let db = db.to_str().unwrap();
    let out = glass(&["load", "voter", "--db", db]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let before = contents(Path::new(db));
    assert_refused(
        &["profile", "tpcb", "--db", db, "--txns", "1"],
        &["voter database", "not tpcb", db],
    );
    assert_eq!(contents(Path::new(db)), before, "{db} was changed");
}

#[test]
fn profile_loads_an_empty_directory_once_then_uses_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().to_str().unwrap();
    let out = glass(&["profile", "voter", "--db", db, "--txns", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let manifest = std::fs::read_to_string(dir.path().join("glass-load.json"))
        .expect("profile wrote no load manifest");
    assert!(manifest.contains("\"voter\""), "{manifest}");
    // The second run finds the load (same manifest) and checks out consistent.
    let out = glass(&["profile", "voter", "--db", db, "--txns", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("glass-load.json")).unwrap(),
        manifest
    );
    let out = glass(&["check", "voter", "--db", db]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn bench_load_and_profile_refuse_a_directory_without_a_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().to_str().unwrap();
    std::fs::write(dir.path().join("pages.db"), b"someone's data").unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"more").unwrap();
    let before = contents(dir.path());
    for args in [
        &["bench", "tpcb", "--db", db, "--txns", "1"][..],
        &["load", "tpcb", "--db", db],
        &["profile", "tpcb", "--db", db, "--txns", "1"],
    ] {
        assert_refused(args, &[db, "pages.db", "notes.txt", "glass-load.json"]);
        assert_eq!(contents(dir.path()), before, "{args:?} wrote into {db}");
    }
    // A file where a directory should be.
    let file = dir.path().join("pages.db");
    assert_refused(
        &[
            "bench",
            "tpcb",
            "--db",
            file.to_str().unwrap(),
            "--txns",
            "1",
        ],
        &["not a directory"],
    );
}

#[test]
fn the_largest_scale_is_refused_at_once_naming_the_flag() {
    for workload in ["tpcc", "tpcb", "ycsb", "voter"] {
        let err = assert_refused(
            &[
                "bench",
                workload,
                "--scale",
                "18446744073709551615",
                "--txns",
                "1",
            ],
            &["--scale 18446744073709551615", "at most"],
        );
        assert!(!err.contains("Config {"), "a Debug dump: {err}");
    }
    assert_refused(
        &[
            "load",
            "tpcb",
            "--db",
            "unused-dir",
            "--scale",
            "18446744073709551615",
        ],
        &["--scale 18446744073709551615"],
    );
    assert!(!Path::new("unused-dir").exists());
}

#[test]
fn a_count_of_zero_is_refused_in_words() {
    for args in [
        &["bench", "tpcc", "--scale", "0"][..],
        &["bench", "voter", "--txns", "0"],
        &["bench", "ycsb", "--scale", "ten"],
    ] {
        let err = assert_refused(args, &["expected a whole number above 0"]);
        assert!(!err.contains("18446744073709551615"), "{err}");
    }
}

#[test]
fn a_pool_beyond_memory_is_refused_not_aborted() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().to_str().unwrap();
    for args in [
        &["bench", "tpcb", "--pool-mib", "1048576", "--txns", "1"][..],
        &["load", "tpcb", "--db", db, "--pool-mib", "1048576"],
        &["check", "tpcb", "--db", db, "--pool-mib", "1048576"],
        &["profile", "tpcb", "--pool-mib", "1048576"],
    ] {
        assert_refused(args, &["--pool-mib 1048576", "1.0 TiB", "memory"]);
    }
}

#[test]
fn an_unwritable_json_path_fails_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("no-such-dir").join("result.json");
    let err = assert_refused(
        &[
            "bench",
            "tpcb",
            "--txns",
            "1",
            "--json",
            json.to_str().unwrap(),
        ],
        &["--json", "result.json"],
    );
    assert!(!err.contains("running"), "{err}");
    // An existing, writable file is left as it was by the check.
    let existing = dir.path().join("old.json");
    std::fs::write(&existing, b"old").unwrap();
    let out = glass(&[
        "bench",
        "voter",
        "--txns",
        "5",
        "--warmup",
        "0",
        "--json",
        existing.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(std::fs::read_to_string(&existing)
        .unwrap()
        .contains("\"voter\""));
}

#[test]
fn durable_without_a_disk_log_is_refused() {
    for switch in ["disk-log=off", "main-log=off"] {
        assert_refused(
            &[
                "bench",
                "voter",
                "--durable",
                "--switch",
                switch,
                "--txns",
                "1",
            ],
            &["--durable", switch],
        );
    }
}

#[test]
fn a_database_on_disk_without_its_log_is_warned_about() {
    for switch in ["main-log=off", "disk-log=off"] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().to_str().unwrap();
        let out = glass(&[
            "bench", "voter", "--db", db, "--switch", switch, "--txns", "5", "--warmup", "0",
            "--quiet",
        ]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(0), "{err}");
        let warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("warning:")).collect();
        assert_eq!(warnings.len(), 1, "{err}");
        assert!(
            warnings[0].contains(switch) && warnings[0].contains(db),
            "{err}"
        );
        assert!(warnings[0].contains("crash"), "{err}");
    }
    // In memory there is nothing to recover: no warning.
    let out = glass(&[
        "bench",
        "voter",
        "--switch",
        "main-log=off",
        "--txns",
        "5",
        "--warmup",
        "0",
        "--quiet",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
}

#[test]
fn profile_help_says_callgrind_only_with_instructions() {
    let out = glass(&["profile", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0));
    let about = help.split("Usage:").next().unwrap();
    assert!(!about.contains("Run a workload under callgrind"), "{about}");
    assert!(about.contains("with --instructions"), "{about}");
}

/// `--instructions` without `--out` leaves nothing in the temporary directory. Needs valgrind.
#[test]
fn instructions_leave_no_temporary_directory() {
    let has_valgrind = Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_valgrind {
        eprintln!("skipped: no valgrind");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = glass_in(
        &["profile", "voter", "--instructions", "--txns", "2"],
        Some(tmp.path()),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left behind in TMPDIR: {left:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("instructions per transaction"));
}
