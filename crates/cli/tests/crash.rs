//! Short crash campaigns, as CI runs them: workloads durable and not, killed with SIGKILL at
//! random moments; after each kill `glass check --ack-log` must find the database intact and
//! every acknowledged durable commit in it. (`glass crash --kills 1000` is the long campaign;
//! its figures are in docs/performance.md.)

use std::path::Path;
use std::process::Command;

mod common;
use common::{glass, output_text, path, read_json};

/// Runs `glass crash ARGS --dir … --json …`; returns what it printed and its lanes, once it
/// has exited 0.
fn campaign(args: &[&str]) -> (String, Vec<serde_json::Value>) {
    campaign_in(tempfile::tempdir().unwrap().path(), args)
}

/// [`campaign`] with its lanes under `dir/lanes`.
fn campaign_in(dir: &Path, args: &[&str]) -> (String, Vec<serde_json::Value>) {
    let json = dir.join("campaign.json");
    let out = Command::new(env!("CARGO_BIN_EXE_glass"))
        .arg("crash")
        .args(args)
        .arg("--dir")
        .arg(dir.join("lanes"))
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let text = output_text(&out);
    assert!(out.status.success(), "{text}");
    let result = read_json(&json);
    let lanes = result["lanes"].as_array().unwrap().clone();
    (text, lanes)
}

fn sum(lanes: &[serde_json::Value], field: &str) -> u64 {
    lanes.iter().map(|l| l[field].as_u64().unwrap()).sum()
}

#[test]
fn a_short_crash_campaign_loses_no_database_and_no_acknowledged_commit() {
    let (text, lanes) = campaign(&["--kills", "24", "--jobs", "2", "--max-run", "1.5"]);
    assert_eq!(lanes.len(), 8, "four workloads, durable and not");
    assert_eq!(sum(&lanes, "kills"), 24);
    assert_eq!(sum(&lanes, "checks_passed"), 24, "{text}");
    assert_eq!(sum(&lanes, "durable_missing"), 0, "{text}");
    // The durable lanes' checks looked commits up: the campaign verified something.
    assert!(sum(&lanes, "durable_receipts") > 0, "{text}");
    // Its stderr a file, not a terminal, the campaign said how far it got, a line a lane.
    for n in 1..=8 {
        assert!(
            text.contains(&format!("[{n}/8] ")),
            "no line for lane {n}: {text}"
        );
    }
}

/// Power cuts after the kills (and after the load), on a file system in memory that loses
/// what was not synced: every lane, durable or not, must pass its check, and the durable ones
/// keep every acknowledged commit. Skipped, saying so, where FUSE cannot be mounted.
#[test]
fn a_power_loss_campaign_loses_no_database_and_no_acknowledged_durable_commit() {
    let probe = tempfile::tempdir().unwrap();
    if powercut::Mounted::mount_or_skip(probe.path()).is_none() {
        return;
    }
    let (text, lanes) = campaign(&[
        "--power-loss",
        "--tear-writes",
        "--kills",
        "16",
        "--jobs",
        "2",
        "--max-run",
        "1.5",
    ]);
    assert_eq!(lanes.len(), 8, "four workloads, durable and not: {text}");
    assert_eq!(sum(&lanes, "kills"), 16);
    assert_eq!(sum(&lanes, "checks_passed"), 16, "{text}");
    assert_eq!(sum(&lanes, "durable_missing"), 0, "{text}");
    assert!(sum(&lanes, "durable_receipts") > 0, "{text}");
    // A cut after each lane's load and after each kill, and they took something away.
    assert_eq!(sum(&lanes, "power_cuts"), 16 + 8, "{text}");
    assert!(sum(&lanes, "cut_blocks_lost") > 0, "{text}");
    assert!(text.contains("| power cuts |"), "{text}");
}

/// A second power-loss campaign in the same directory loads its databases again (the first
/// one's lived in memory); the receipts the first left in a durable lane's ack log are not
/// looked up in the new database as commits it lost.
#[test]
fn a_power_loss_campaign_in_the_directory_of_an_earlier_one_finds_no_commit_missing() {
    let probe = tempfile::tempdir().unwrap();
    if powercut::Mounted::mount_or_skip(probe.path()).is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The same draws, the second run's kill sooner: its database holds fewer commits than the
    // first's receipts name. (With the default seed the durable lane's kill falls at 0.30 of
    // `--max-run`: at 3 s, a loaded machine's bench had committed nothing by 0.9 s.)
    for (run, max_run) in [(1, "10"), (2, "0.5")] {
        let (text, lanes) = campaign_in(
            dir.path(),
            &[
                "--power-loss",
                "--workloads",
                "tpcb",
                "--kills",
                "2",
                "--max-run",
                max_run,
            ],
        );
        assert_eq!(sum(&lanes, "checks_passed"), 2, "campaign {run}: {text}");
        assert_eq!(sum(&lanes, "durable_missing"), 0, "campaign {run}: {text}");
        if run == 1 {
            assert!(sum(&lanes, "durable_receipts") > 0, "{text}");
        }
    }
}

/// The same with a buffer pool far smaller than the data: the benches evict pages their
/// running transactions dirtied (steal), so each recovery must undo changes that reached the
/// page file, not only redo the ones that did not.
#[test]
fn a_crash_campaign_with_a_pool_smaller_than_the_data_loses_nothing() {
    let (text, lanes) = campaign(&[
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
    ]);
    assert_eq!(sum(&lanes, "checks_passed"), 8, "{text}");
    assert_eq!(sum(&lanes, "durable_missing"), 0, "{text}");
    // The checks' recoveries met logged changes already in the page file (written back by
    // evictions and checkpoints while the benches ran), and the campaign read their counts.
    assert!(sum(&lanes, "found_on_disk") > 0, "{text}");
}

/// Page writes torn by the kills (`--tear-writes`: each page written in two halves with a
/// pause between): in half of each lane's rounds the first half new, as a killed process
/// leaves a page, in the others the second half new, as a power loss may. Every check's
/// recovery rebuilds the torn pages from the log (from full-page images where the header is
/// old), or puts them back from the doublewrite file in the rounds that write through one,
/// and finds the database intact, durable or not.
#[test]
fn page_writes_torn_by_the_kills_are_rebuilt() {
    let (text, lanes) = campaign(&[
        "--workloads",
        "tpcb,ycsb",
        "--kills",
        "24",
        "--jobs",
        "2",
        "--max-run",
        "3",
        "--tear-writes",
    ]);
    assert_eq!(sum(&lanes, "checks_passed"), 24, "{text}");
    assert_eq!(sum(&lanes, "durable_missing"), 0, "{text}");
    // Every third round of a lane writes through a doublewrite file.
    let through_the_file = sum(&lanes, "doublewrite_kills");
    assert!((4..=12).contains(&through_the_file), "{text}");
    let rebuilt = |durable: bool| -> u64 {
        lanes
            .iter()
            .filter(|l| l["durable"] == durable)
            .map(|l| l["torn_rebuilt"].as_u64().unwrap() + l["torn_put_back"].as_u64().unwrap())
            .sum()
    };
    assert!(rebuilt(true) > 0, "no torn page in a durable lane: {text}");
    assert!(
        rebuilt(false) > 0,
        "no torn page in a lane not durable: {text}"
    );
}

/// Kills that fall while a bench starts, before it has opened its ack log or its database:
/// each check finds an ack log of no runs and a database intact.
#[test]
fn kills_while_the_benches_start_fail_no_check() {
    let (text, lanes) = campaign(&["--workloads", "tpcb", "--kills", "20", "--max-run", "0.02"]);
    assert_eq!(sum(&lanes, "kills"), 20, "{text}");
    assert_eq!(sum(&lanes, "checks_passed"), 20, "{text}");
}

/// The server killed instead of the bench: `glass serve --db` under clients that call stored
/// procedures or send interactive transactions, killed with SIGKILL; every commit a client
/// was told of (durably, where the server forces its log) is found after recovery.
#[test]
fn a_short_crash_campaign_of_the_server_loses_no_acknowledged_commit() {
    let (text, lanes) = campaign(&[
        "--workloads",
        "tpcb,voter",
        "--via",
        "sp,interactive",
        "--kills",
        "16",
        "--max-run",
        "2",
    ]);
    assert_eq!(lanes.len(), 8, "two workloads, two ways, durable and not");
    for via in ["sp", "interactive"] {
        assert_eq!(
            lanes.iter().filter(|l| l["via"] == via).count(),
            4,
            "{text}"
        );
    }
    assert_eq!(sum(&lanes, "checks_passed"), 16, "{text}");
    assert_eq!(sum(&lanes, "durable_missing"), 0, "{text}");
    // The clients had commits acknowledged before the kills: the checks looked them up.
    assert!(sum(&lanes, "durable_receipts") > 0, "{text}");
    assert!(text.contains("| tpcb | yes | interactive |"), "{text}");
}

#[test]
fn an_unknown_way_to_run_is_refused_by_name() {
    let out = Command::new(env!("CARGO_BIN_EXE_glass"))
        .args(["crash", "--via", "sideways"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("\"sideways\" is not one of embedded, sp, interactive"),
        "{err}"
    );
}

/// The pages a check's recovery writes back go through the database's doublewrite file, so
/// that a power loss during the check leaves none torn beyond repair; a loaded database, which
/// has no such file, gets none from a check either.
#[test]
fn a_checks_recovery_writes_its_pages_through_the_doublewrite_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let dw = db.join("doublewrite.db");
    let json = dir.path().join("check.json");
    // What the check printed, and its report's count of the pages it wrote back through the file.
    let check = || {
        let out = glass(&["check", "tpcb", "--db", path(&db), "--json", path(&json)]);
        let text = output_text(&out);
        assert!(out.status.success(), "{text}");
        (text, read_json(&json)["doublewrite"].clone())
    };
    let out = glass(&["load", "tpcb", "--scale", "1", "--db", path(&db)]);
    assert!(out.status.success(), "{}", output_text(&out));
    let (text, doublewrite) = check();
    assert!(doublewrite.is_null(), "{text}");
    assert!(
        std::fs::metadata(&dw).map_or(true, |m| m.len() == 0),
        "a check of a loaded database made a doublewrite file"
    );

    // A run killed with pages of a small pool still dirty: its recovery redoes them.
    let mut bench = Command::new(env!("CARGO_BIN_EXE_glass"))
        .args(["bench", "tpcb", "--db", path(&db)])
        .args(["--pool-mib", "2", "--threads", "2", "--duration", "100000"])
        .args(["--warmup", "0", "--quiet", "--checkpoint-kib", "1024"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2500));
    assert!(bench.try_wait().unwrap().is_none(), "the bench ended early");
    bench.kill().unwrap(); // SIGKILL
    bench.wait().unwrap();
    assert!(std::fs::metadata(&dw).unwrap().len() > 0);

    let (text, doublewrite) = check();
    assert!(doublewrite["pages"].as_u64().unwrap() > 0, "{text}");
    assert!(
        text.contains("pages written back through the doublewrite file"),
        "{text}"
    );
}

/// Ctrl-C during a lane's load cuts the load short (it once ran to its end first) and leaves
/// no half-loaded database behind (the next campaign, finding no manifest, loads it again).
#[test]
fn ctrl_c_during_a_load_cuts_it_and_leaves_no_half_database() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let lanes = dir.path().join("lanes");
    let mut campaign = Command::new(env!("CARGO_BIN_EXE_glass"))
        .args([
            "crash",
            "--workloads",
            "tpcc",
            "--kills",
            "2",
            "--jobs",
            "1",
        ])
        .args(["--max-run", "600", "--seed", "7", "--dir", path(&lanes)])
        .process_group(0)
        .stdout(std::fs::File::create(dir.path().join("out.txt")).unwrap())
        .stderr(std::fs::File::create(dir.path().join("err.txt")).unwrap())
        .spawn()
        .unwrap();
    // The first lane's load has begun (it creates the database; it takes seconds).
    let db = lanes.join("tpcc-durable").join("db");
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !db.exists() {
        assert!(
            campaign.try_wait().unwrap().is_none(),
            "ended before loading"
        );
        assert!(
            std::time::Instant::now() < give_up,
            "the load never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // SAFETY: a plain kill(2) of the process group the test created.
    assert_eq!(
        unsafe { libc::kill(-(campaign.id() as i32), libc::SIGINT) },
        0
    );
    let status = common::wait_or_kill(
        &mut campaign,
        std::time::Duration::from_secs(60),
        "the campaign, after Ctrl-C during a load,",
    );
    let printed = std::fs::read_to_string(dir.path().join("out.txt")).unwrap();
    assert_eq!(status.code(), Some(130), "{status}: {printed}");
    assert!(printed.contains("interrupted"), "{printed}");
    assert!(!db.exists(), "a half-loaded database was left behind");
    assert!(
        !lanes.join("tpcc-durable").join("bench.log").exists(),
        "a round ran: the load was not cut"
    );
}

/// Ctrl-C at the terminal (SIGINT to the foreground process group) ends a campaign in order:
/// it exits 130 with its table, saying it was interrupted, and leaves no bench running and,
/// with power cuts, no file system mounted (it once died at once, its benches with it, and
/// left each lane's FUSE mount behind).
#[test]
fn ctrl_c_ends_a_campaign_in_order() {
    use std::os::unix::process::CommandExt;
    let probe = tempfile::tempdir().unwrap();
    let power_loss = powercut::Mounted::mount_or_skip(probe.path()).is_some();
    let dir = tempfile::tempdir().unwrap();
    let lanes = dir.path().join("lanes");
    let json = dir.path().join("campaign.json");
    let mut command = Command::new(env!("CARGO_BIN_EXE_glass"));
    // Kills drawn up to 10 minutes after each bench starts (with this seed, none within the
    // seconds this test waits), so the signal falls while both lanes' benches run.
    command
        .args([
            "crash",
            "--workloads",
            "tpcb",
            "--kills",
            "2",
            "--jobs",
            "2",
        ])
        .args(["--max-run", "600", "--seed", "7", "--dir", path(&lanes)])
        .args(["--json", path(&json)]);
    if power_loss {
        command.arg("--power-loss");
    }
    let out = dir.path().join("out.txt");
    let mut campaign = command
        .process_group(0)
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(dir.path().join("err.txt")).unwrap())
        .spawn()
        .unwrap();
    let running = |lane: &str| lanes.join(lane).join("bench.log").exists();
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !(running("tpcb-durable") && running("tpcb-not-durable")) {
        assert!(
            campaign.try_wait().unwrap().is_none(),
            "the campaign ended before its benches ran"
        );
        assert!(
            std::time::Instant::now() < give_up,
            "the benches never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_secs(1));
    // SAFETY: a plain kill(2) of the process group the test created.
    assert_eq!(
        unsafe { libc::kill(-(campaign.id() as i32), libc::SIGINT) },
        0
    );
    let status = common::wait_or_kill(
        &mut campaign,
        std::time::Duration::from_secs(60),
        "the campaign, after Ctrl-C,",
    );
    let printed = std::fs::read_to_string(&out).unwrap();
    assert_eq!(status.code(), Some(130), "{status}: {printed}");
    assert!(printed.contains("interrupted"), "{printed}");
    assert!(printed.contains("0 kills in"), "{printed}");
    let result = read_json(&json);
    assert_eq!(result["interrupted"], true);
    assert_eq!(result["lanes"].as_array().unwrap().len(), 2);
    // No process of the campaign's left: none names the lanes' directory.
    let lanes_text = lanes.display().to_string();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            assert!(
                !cmdline.contains(&lanes_text),
                "still running after the campaign: {cmdline}"
            );
        }
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mounts.contains(&lanes_text),
        "a lane's file system is still mounted: {mounts}"
    );
}
