//! `glass serve` and `glass bench --server` as a user runs them: the server prints where it
//! listens, clients of every mode run against it over TCP and a Unix socket, SIGTERM stops it
//! cleanly (exit 0, consistency checked, conditions that autocommit clients broke explained);
//! and with `--durable`, every commit acknowledged over the wire survives a `kill -9` of the
//! server.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

mod common;
use common::{read_json, signal, wait_or_kill};

fn glass(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_glass"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Starts `glass serve ARGS` and returns it with the TCP address it printed.
fn serve(args: &[&str]) -> (Child, BufReader<std::process::ChildStdout>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_glass"))
        .arg("serve")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on tcp://")
        .unwrap_or_else(|| panic!("serve printed {line:?} first"))
        .to_string();
    (child, stdout, addr)
}

fn bench(server: &str, mode: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "bench",
        "tpcb",
        "--scale",
        "2",
        "--server",
        server,
        "--mode",
        mode,
        "--threads",
        "2",
        "--duration",
        "1",
        "--warmup",
        "0",
        "--quiet",
    ];
    args.extend_from_slice(extra);
    glass(&args)
}

#[test]
fn serve_answers_every_mode_and_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("glass.sock");
    let socket_arg = socket.to_str().unwrap();
    let (mut child, stdout, addr) = serve(&[
        "tpcb",
        "--scale",
        "2",
        "--listen",
        "127.0.0.1:0",
        "--unix",
        socket_arg,
        "--workers",
        "2",
        "--arch",
        "unified",
        "--quiet",
    ]);
    let unix = format!("unix://{socket_arg}");
    for (server, mode) in [
        (addr.as_str(), "sp"),
        (unix.as_str(), "interactive"),
        (addr.as_str(), "autocommit"),
    ] {
        let json = dir.path().join(format!("{mode}.json"));
        let out = bench(server, mode, &["--json", json.to_str().unwrap()]);
        let t = text(&out);
        assert!(out.status.success(), "{mode}: {t}");
        // The client's result as JSON too (it once wrote none), with its round trips.
        let result = read_json(&json);
        assert!(result["txn_count"].as_u64().unwrap() > 0, "{result}");
        assert_eq!(result["interrupted"], false);
        assert_eq!(result["round_trips"]["mode"], mode);
        // The server runs here, so the share of the CPUs others took is known (the server's
        // work counted as the run's own): a fraction, whatever else this machine runs.
        let others = result["others_cpu_share"]
            .as_f64()
            .expect("others_cpu_share");
        assert!((0.0..=1.0).contains(&others), "{others}");
        assert!(
            result["round_trips"]["per_txn"]["account_update"]
                .as_f64()
                .unwrap()
                >= 1.0
        );
        assert!(
            t.contains("consistency: checked by the server when it stops"),
            "{t}"
        );
        assert!(t.contains(&format!("({mode} mode;")), "{t}");
        // Only the autocommit client warns that its run may break the server's check.
        assert_eq!(
            t.contains("autocommit mode commits each operation alone"),
            mode == "autocommit",
            "{t}"
        );
    }
    // A client of another workload is told so.
    let out = glass(&[
        "bench",
        "voter",
        "--server",
        &addr,
        "--duration",
        "1",
        "--quiet",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("serves tpcb, not voter"),
        "{}",
        text(&out)
    );

    signal(&child, libc::SIGTERM);
    let status = child.wait().unwrap();
    let rest = rest_of(stdout);
    assert!(status.success(), "{status}: {rest}");
    // TPC-B's conditions hold even after auto-committed steps: each moves money once.
    assert!(rest.contains("conditions hold"), "{rest}");
    // The default pool held the database and what the clients added.
    assert!(!rest.contains("pool: "), "{rest}");
    assert!(!socket.exists(), "the socket file is left behind");
}

/// Reads the rest of a stopped server's output.
fn rest_of(stdout: BufReader<std::process::ChildStdout>) -> String {
    stdout.lines().map(|l| l.unwrap() + "\n").collect()
}

#[test]
fn conditions_broken_by_autocommit_clients_are_explained_and_exit_0() {
    let (mut child, stdout, addr) = serve(&[
        "tpcc",
        "--scale",
        "1",
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "2",
        "--quiet",
    ]);
    // TPC-C's procedures cut into steps that commit alone break its conditions: a Payment's
    // warehouse and district updates commit apart, a New-Order that rolls back at its last
    // item keeps its order.
    let out = glass(&[
        "bench",
        "tpcc",
        "--scale",
        "1",
        "--server",
        &addr,
        "--mode",
        "autocommit",
        "--threads",
        "2",
        "--duration",
        "2",
        "--warmup",
        "0",
        "--quiet",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    signal(&child, libc::SIGTERM);
    let status = child.wait().unwrap();
    let rest = rest_of(stdout);
    assert!(status.success(), "{status}: {rest}");
    if rest.contains("VIOLATED") {
        let expected = rest
            .lines()
            .find_map(|l| l.trim().strip_prefix("(expected: "))
            .unwrap_or_else(|| panic!("violations not explained: {rest}"));
        let lone: u64 = expected.split(' ').next().unwrap().parse().unwrap();
        assert!(lone > 0, "{rest}");
        assert!(!rest.contains("a fault"), "{rest}");
    }
}

/// Serves `args`, runs one stored-procedure bench against it, stops it with SIGTERM, and
/// returns what it printed from then on (its report).
fn report_after_one_bench(args: &[&str]) -> String {
    let (mut child, stdout, addr) = serve(args);
    let out = bench(&addr, "sp", &[]);
    assert!(out.status.success(), "{}", text(&out));
    signal(&child, libc::SIGTERM);
    let status = child.wait().unwrap();
    let rest = rest_of(stdout);
    assert!(status.success(), "{status}: {rest}");
    rest
}

#[test]
fn a_server_whose_data_outgrew_its_pool_says_so_when_it_stops() {
    let rest = report_after_one_bench(&[
        "tpcb",
        "--scale",
        "2",
        "--listen",
        "127.0.0.1:0",
        "--pool-mib",
        "1",
        "--quiet",
    ]);
    assert!(
        rest.contains("written out while serving: the data outgrew the 1 MiB pool"),
        "{rest}"
    );
}

#[test]
fn a_durable_server_says_what_its_page_images_were_when_it_stops() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let rest = report_after_one_bench(&[
        "tpcb",
        "--scale",
        "2",
        "--db",
        db.to_str().unwrap(),
        "--durable",
        "--doublewrite",
        "off",
        "--listen",
        "127.0.0.1:0",
        "--quiet",
    ]);
    // Durable on disk without the doublewrite file, images are on by default; every page was
    // clean at the open, so the first change of each page the clients touched logged its
    // image.
    let line = rest
        .lines()
        .find(|l| l.starts_with("full-page images: "))
        .unwrap_or_else(|| panic!("no images line: {rest}"));
    assert!(line.contains("MiB logged while serving, "), "{line}");
    assert!(line.contains("% of the "), "{line}");
}

#[test]
fn a_durable_server_writes_through_a_doublewrite_file_by_default_and_logs_no_images() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let rest = report_after_one_bench(&[
        "tpcb",
        "--scale",
        "2",
        "--db",
        db.to_str().unwrap(),
        "--durable",
        "--pool-mib",
        "1",
        "--listen",
        "127.0.0.1:0",
        "--quiet",
    ]);
    // The pool is far smaller than the data: evicted pages went out through the file.
    assert!(
        rest.contains("page writes went through the doublewrite file first"),
        "{rest}"
    );
    assert!(!rest.contains("full-page images: "), "{rest}");
}

#[test]
fn serve_refuses_a_missing_address_and_a_busy_port() {
    let out = glass(&["serve", "tpcb", "--scale", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--listen"), "{}", text(&out));
    let out = glass(&["serve", "tpcb", "--listen", "unix:///tmp/x"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));

    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = glass(&[
        "serve", "tpcb", "--scale", "1", "--listen", &addr, "--quiet",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("listen on tcp://{addr}")),
        "{}",
        text(&out)
    );
}

fn ack_line(out: &str) -> &str {
    out.lines()
        .find(|l| l.starts_with("ack log: "))
        .unwrap_or_else(|| panic!("no ack log line in {out}"))
}

#[test]
fn a_commit_acknowledged_over_the_wire_survives_kill_9_of_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let acks = dir.path().join("acks");
    let db_arg = db.to_str().unwrap();
    let (mut child, _stdout, addr) = serve(&[
        "tpcb",
        "--scale",
        "2",
        "--db",
        db_arg,
        "--durable",
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "2",
        "--quiet",
    ]);
    let client = std::thread::spawn({
        let (addr, acks) = (addr.clone(), acks.clone());
        move || {
            glass(&[
                "bench",
                "tpcb",
                "--scale",
                "2",
                "--server",
                &addr,
                "--threads",
                "2",
                "--duration",
                "30",
                "--warmup",
                "0",
                "--durable",
                "--ack-log",
                acks.to_str().unwrap(),
                "--quiet",
            ])
        }
    });
    // Kill the server while the clients commit.
    wait_for_acks(&acks, 200);
    signal(&child, libc::SIGKILL);
    child.wait().unwrap();
    let out = client.join().unwrap();
    assert!(
        !out.status.success(),
        "the client went on without its server"
    );

    let out = glass(&[
        "check",
        "tpcb",
        "--db",
        db_arg,
        "--ack-log",
        acks.to_str().unwrap(),
    ]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    // "ack log: R runs; D durable commits checked, M missing".
    let line = ack_line(&t);
    let numbers: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    assert!(numbers.len() >= 3, "{line}");
    assert!(
        numbers[1] >= 200,
        "fewer durable commits checked than acknowledged: {line}"
    );
    assert_eq!(numbers[2], 0, "{line}");
}

/// Waits until the ack log holds `lines` acknowledged commits (or 60 s pass).
fn wait_for_acks(path: &Path, lines: usize) {
    for _ in 0..600 {
        let n = std::fs::read_to_string(path)
            .map(|t| t.lines().filter(|l| l.starts_with('+')).count())
            .unwrap_or(0);
        if n >= lines {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the client acknowledged fewer than {lines} commits in 60 s");
}

/// A server of YCSB-C over 2,000 records with two workers on a free loopback port, and `extra`
/// flags: what the latency sweeps below drive.
fn ycsb_c_server(extra: &[&str]) -> (Child, BufReader<std::process::ChildStdout>, String) {
    let base = [
        "ycsb",
        "--scale",
        "2000",
        "--ycsb-workload",
        "C",
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "2",
        "--quiet",
    ];
    serve(&[&base[..], extra].concat())
}

/// `glass latency` of YCSB-C (2,000 records) against `addr` over two connections, then `rest`.
fn latency_of_ycsb_c<'a>(addr: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
    let base = [
        "latency",
        "ycsb",
        "--scale",
        "2000",
        "--ycsb-workload",
        "C",
        "--server",
        addr,
        "--connections",
        "2",
    ];
    [&base[..], rest].concat()
}

#[test]
fn latency_ramps_each_mode_and_writes_its_curves() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, _stdout, addr) = ycsb_c_server(&["--arch", "unified"]);
    let json = dir.path().join("latency.json");
    let out = glass(&latency_of_ycsb_c(
        &addr,
        &[
            "--steps",
            "0.2,0.5",
            "--duration",
            "0.5",
            "--warmup",
            "0.2",
            "--out",
            dir.path().to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
            "--quiet",
        ],
    ));
    signal(&child, libc::SIGTERM);
    child.wait().unwrap();
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    let result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let curves = result["curves"].as_array().unwrap();
    assert_eq!(curves.len(), 2, "sp and interactive: {result}");
    for c in curves {
        let peak = c["peak_tps"].as_f64().unwrap();
        assert!(peak > 0.0, "{c}");
        let points = c["points"].as_array().unwrap();
        let point = |i: usize, what: &str| points[i][what].as_f64().unwrap();
        // Each point offers its step of the peak, and an open loop never achieves more than
        // it offers (the slots that fell in the measured time, give or take one).
        for (i, step) in [0.2, 0.5].iter().enumerate().take(points.len()) {
            let offered = point(i, "offered_tps");
            assert!((offered - step * peak).abs() < 1.0, "{c}");
            assert!(point(i, "achieved_tps") <= offered + 2.0 / 0.5, "{c}");
        }
        // The sweep goes on up the steps until one saturates (achieves under 90% of what it
        // offered). How far a fifth of the peak gets depends on how busy the machine is: on
        // a loaded one the first step has saturated, so either is right, never both.
        let first_saturated = point(0, "achieved_tps") < 0.9 * point(0, "offered_tps");
        assert_eq!(points.len(), if first_saturated { 1 } else { 2 }, "{c}");
    }
    assert!(t.contains("latency against load: ycsb"), "{t}");
    // The server runs here: the share of the CPUs others took over the sweep is known.
    let others = result["others_cpu_share"]
        .as_f64()
        .expect("others_cpu_share");
    assert!((0.0..=1.0).contains(&others), "{others}");
}

/// Ctrl-C ends a latency sweep in order: the run measuring is left out, the points measured
/// before it are printed and written, saying it was interrupted, and it exits 130.
#[test]
fn ctrl_c_ends_a_latency_sweep_with_the_points_measured() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, _stdout, addr) = ycsb_c_server(&[]);
    let json = dir.path().join("latency.json");
    // Runs of 2 s: the peak of each mode, then the first step of each. Every mode's first
    // step is run (a step that saturates ends only its own mode's sweep), so a signal sent as
    // soon as sp's is printed falls in interactive's, however busy the machine.
    let mut latency = common::Running::start(
        dir.path(),
        &latency_of_ycsb_c(
            &addr,
            &[
                "--modes",
                "sp,interactive",
                "--steps",
                "0.2,0.4,0.6",
                "--duration",
                "2",
                "--warmup",
                "0",
                "--out",
                dir.path().to_str().unwrap(),
                "--json",
                json.to_str().unwrap(),
            ],
        ),
    );
    latency.wait_for("sp: offered ");
    let (status, printed, said) = latency.interrupt(Duration::ZERO);
    signal(&server, libc::SIGTERM);
    assert!(server.wait().unwrap().success());
    assert_eq!(status.code(), Some(130), "{status}: {printed}{said}");
    assert!(said.contains("interrupted; left out"), "{said}");
    assert!(
        printed.contains("interrupted (Ctrl-C or SIGTERM)"),
        "{printed}"
    );
    let result = read_json(&json);
    assert_eq!(result["interrupted"], true, "{result}");
    let points = |mode: usize| result["curves"][mode]["points"].as_array().unwrap().clone();
    let sp = points(0);
    assert_eq!(sp.len(), 1, "sp's first step only: {result}");
    assert!(sp[0]["achieved_tps"].as_f64().unwrap() > 0.0, "{result}");
    assert!(
        points(1).is_empty(),
        "interactive's step left out: {result}"
    );
}

/// `glass section3` of YCSB alone (2,000 records, two connections) into `out`, each run
/// `duration` seconds after a warm-up of 0.1.
fn section3_of_ycsb<'a>(out: &'a str, duration: &'a str) -> Vec<&'a str> {
    vec![
        "section3",
        "--workloads",
        "ycsb",
        "--ycsb-records",
        "2000",
        "--connections",
        "2",
        "--duration",
        duration,
        "--warmup",
        "0.1",
        "--out",
        out,
    ]
}

/// `glass section3` of YCSB alone, short runs, into `dir/out`, interrupted (as Ctrl-C does)
/// once its stderr says `at`: its exit status, stdout, stderr, report and JSON.
fn section3_interrupted_at(
    dir: &Path,
    at: &str,
) -> (
    std::process::ExitStatus,
    String,
    String,
    String,
    serde_json::Value,
) {
    let out = dir.join("out");
    let mut section = common::Running::start(dir, &section3_of_ycsb(out.to_str().unwrap(), "1"));
    section.wait_for(at);
    let (status, printed, said) = section.interrupt(Duration::ZERO);
    let md = std::fs::read_to_string(out.join("section3.md")).unwrap();
    assert_eq!(
        printed.trim_end().lines().next(),
        md.lines().next(),
        "{printed}"
    );
    (
        status,
        printed,
        said,
        md,
        read_json(&out.join("section3.json")),
    )
}

/// Ctrl-C ends `glass section3` in order: a figure of closed-loop runs it cut short is left
/// out, Figure 4's sweep keeps the points measured before it (as `glass latency`'s), nothing
/// after either runs, and what was measured is written, saying so; it exits 130.
#[test]
fn ctrl_c_ends_section3_with_the_figures_measured() {
    // Figure 3's two runs are done; the signal falls in one of Figure 5's three.
    let dir = tempfile::tempdir().unwrap();
    let (status, printed, said, md, json) =
        section3_interrupted_at(dir.path(), "section 3: ycsb int...");
    assert_eq!(status.code(), Some(130), "{status}: {printed}{said}");
    assert!(
        said.contains("section 3: interrupted during Figure 5; nothing after it ran"),
        "{said}"
    );
    assert!(
        md.contains("## Figure 3")
            && md.contains(
                "Interrupted (Ctrl-C or SIGTERM) during Figure 5**: the run then \
                            measuring is left out, with the rest of the figure"
            ),
        "{md}"
    );
    assert!(
        !md.contains("## Figure 5") && !md.contains("## Figure 4"),
        "{md}"
    );
    assert_eq!(json["interrupted"]["during"], "Figure 5", "{json}");
    assert_eq!(json["figure3"].as_array().unwrap().len(), 2, "{json}");
    assert!(
        json["figure5"].is_null() && json["figure4"].is_null(),
        "{json}"
    );

    // Figures 3 and 5 are done; the signal falls in YCSB's latency sweep.
    let dir = tempfile::tempdir().unwrap();
    let (status, printed, said, md, json) =
        section3_interrupted_at(dir.path(), "section 3: ycsb latency against load...");
    assert_eq!(status.code(), Some(130), "{status}: {printed}{said}");
    assert!(
        md.contains("## Figure 5") && md.contains("## Figure 4"),
        "{md}"
    );
    assert!(
        md.contains("during Figure 4 (ycsb)**: the run then measuring is left out; its curves"),
        "{md}"
    );
    assert_eq!(json["interrupted"]["during"], "Figure 4 (ycsb)", "{json}");
    assert_eq!(json["figure5"].as_array().unwrap().len(), 3, "{json}");
    let sweeps = json["figure4"].as_array().unwrap();
    assert_eq!(sweeps.len(), 1, "{json}");
    assert_eq!(sweeps[0]["interrupted"], true, "{json}");
}

#[test]
fn section3_writes_each_figure_and_table_with_the_papers_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let out = glass(&section3_of_ycsb(dir.path().to_str().unwrap(), "0.3"));
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    let md = std::fs::read_to_string(dir.path().join("section3.md")).unwrap();
    for heading in ["## Figure 3", "## Figure 5", "## Figure 4", "## End to end"] {
        assert!(md.contains(heading), "{heading} missing: {md}");
    }
    // The paper's numbers stand beside ours.
    assert!(md.contains("410, 312, 64, 34"), "{md}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("section3.json")).unwrap())
            .unwrap();
    assert_eq!(
        json["figure3"].as_array().unwrap().len(),
        2,
        "two architectures"
    );
    assert!(json["cpu_idle"].is_object(), "{}", json["cpu_idle"]);
    assert_eq!(json["interrupted"], false, "{json}");
    // The share of the machine's CPU others took while it measured (its servers and their
    // procedure processes are its own): a fraction, whatever else this machine runs.
    let others = json["others_cpu_share"].as_f64().expect("others_cpu_share");
    assert!((0.0..=1.0).contains(&others), "{others}");
    // Three bars for the one workload, each with a positive throughput and traced work.
    let bars = json["figure5"].as_array().unwrap();
    assert_eq!(bars.len(), 3);
    for bar in bars {
        assert!(bar["tps"].as_f64().unwrap() > 0.0, "{bar}");
        let query = bar["trace"]["us_per_txn"]["query execution"]
            .as_f64()
            .unwrap();
        assert!(query > 0.0, "{bar}");
    }
    let glass_out = glass(&["section3", "--workloads", "voter"]);
    assert_eq!(glass_out.status.code(), Some(2), "{}", text(&glass_out));
}

/// A figure command killed outright (SIGKILL runs no cleanup of its own) leaves no `glass
/// serve` of its own running: the kernel ends each server it started. Before, a `kill` of
/// `glass section3` left its server listening for good.
#[test]
fn a_figure_command_killed_leaves_no_server_behind() {
    let dir = tempfile::tempdir().unwrap();
    let mut section3 = Command::new(env!("CARGO_BIN_EXE_glass"))
        .args(["section3", "--workloads", "ycsb", "--ycsb-records", "2000"])
        .args(["--duration", "600", "--warmup", "0", "--out"])
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let needle = dir.path().to_str().unwrap();
    // Its first server, started with `--trace-json` into the output directory, runs.
    let give_up = std::time::Instant::now() + Duration::from_secs(120);
    while !common::running_with(&format!("{needle}/trace-")) {
        assert!(
            section3.try_wait().unwrap().is_none(),
            "section3 ended first"
        );
        assert!(std::time::Instant::now() < give_up, "no server started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Past its start: it has told section3 where it listens (a server killed before that dies
    // of the closed pipe anyway) and serves section3's client.
    std::thread::sleep(Duration::from_secs(2));
    signal(&section3, libc::SIGKILL);
    section3.wait().unwrap();
    let started = std::time::Instant::now();
    while common::running_with(needle) {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "a server of the killed section3 runs on"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Ctrl-C ends a client's run where it is, as it ends an embedded one: the table over the time
/// measured, exit status 130. (The signal may land on the client thread's wait in epoll,
/// which must not pass for a failed connection; which thread takes it is the kernel's choice,
/// so a run of this test does not always go that way.)
#[test]
fn ctrl_c_ends_a_clients_run_with_its_figures_so_far() {
    let (mut server, _stdout, addr) = serve(&[
        "tpcb",
        "--scale",
        "2",
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "2",
        "--quiet",
    ]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let out = dir.path().join("out.txt");
    let mut client = Command::new(env!("CARGO_BIN_EXE_glass"))
        .args(["bench", "tpcb", "--scale", "2", "--server", &addr])
        .args(["--threads", "4", "--duration", "600", "--warmup", "0"])
        .arg("--json")
        .arg(&json)
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        client.try_wait().unwrap().is_none(),
        "the client ended first"
    );
    signal(&client, libc::SIGINT);
    let status = wait_or_kill(
        &mut client,
        Duration::from_secs(60),
        "the client, after Ctrl-C,",
    );
    let printed = std::fs::read_to_string(&out).unwrap();
    assert_eq!(status.code(), Some(130), "{status}: {printed}");
    assert!(
        printed.contains("interrupted: the figures cover the"),
        "{printed}"
    );
    let result = read_json(&json);
    assert_eq!(result["interrupted"], true);
    assert!(result["txn_count"].as_u64().unwrap() > 0, "{result}");
    signal(&server, libc::SIGTERM);
    assert!(server.wait().unwrap().success());
}
