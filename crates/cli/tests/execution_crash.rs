//! A crash during two-stage execution: `glass bench tpcc --execution S` with a pool far
//! smaller than the data (so fetch stages read and pin, OTSTE converts and rolls back) is
//! killed with SIGKILL mid-run, once per strategy; `glass check --ack-log` must then find the
//! database recovered, intact, consistent, and holding every acknowledged durable commit.

use std::process::{Command, Stdio};
use std::time::Duration;

fn glass() -> Command {
    Command::new(env!("CARGO_BIN_EXE_glass"))
}

mod common;
use common::output_text;

#[test]
fn a_kill_during_two_stage_execution_recovers_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let out = glass()
        .args(["load", "tpcc", "--scale", "1", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    for (round, strategy) in ["tste", "otste", "htste"].into_iter().enumerate() {
        let acks = dir.path().join(format!("acks-{strategy}"));
        let mut bench = glass()
            .args(["bench", "tpcc", "--db"])
            .arg(&db)
            .args([
                "--execution",
                strategy,
                "--mix",
                "charm",
                "--page-locking",
                "--pool-mib",
                "4",
                "--threads",
                "4",
                "--durable",
                "--duration",
                "100000",
                "--warmup",
                "0",
                "--quiet",
                "--checkpoint-kib",
                "256",
                "--seed",
            ])
            .arg((round + 7).to_string())
            .arg("--ack-log")
            .arg(&acks)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Long enough to open the database and run well into the workload.
        std::thread::sleep(Duration::from_millis(3000 + 700 * round as u64));
        assert!(
            bench.try_wait().unwrap().is_none(),
            "{strategy}: the bench ended before its kill: {}",
            output_text(&bench.wait_with_output().unwrap())
        );
        bench.kill().unwrap(); // SIGKILL
        bench.wait().unwrap();
        let out = glass()
            .args(["check", "tpcc", "--db"])
            .arg(&db)
            .arg("--ack-log")
            .arg(&acks)
            .output()
            .unwrap();
        let text = output_text(&out);
        assert!(out.status.success(), "{strategy}: {text}");
        assert!(text.contains("12 of 12"), "{strategy}: {text}");
        // The check looked acknowledged commits up: the run committed before its kill.
        let checked: u64 = text
            .split("ack log: 1 run; ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{strategy}: no ack log summary in {text}"));
        assert!(checked > 0, "{strategy}: {text}");
        assert!(text.contains(", 0 missing"), "{strategy}: {text}");
    }
}
