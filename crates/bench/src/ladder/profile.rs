//! `glass profile WORKLOAD --instructions`: any workload, any configuration, under callgrind;
//! instructions per transaction by type and component.
//!
//! ```text
//!   parent: valgrind (callgrind_args) glass profile ... --child   ─► OUT/profile.callgrind.N
//!           (OUT: --out, or a temporary directory removed when the table is made)
//!   child:  open_loaded ─► one terminal ─► warm-up (both uninstrumented) ─► for each type t:
//!             `txns` transactions of type t (draw until t; measured_txn counted) ─► dump "t"
//!   parent: parse dump N (one per type that was drawn) ─► table
//! ```
//!
//! A type the workload never draws (within 100,000 tries, e.g. Order-Status under the paper
//! mix) is skipped.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use anyhow::{bail, Context};
use engine::db::DbConfig;
use serde::{Deserialize, Serialize};
use workloads::{Workload, WorkloadOptions};

use super::measure::measured_txn;
use crate::callgrind::{client, Component, Profile};
use crate::run::{open_loaded, Status};

/// Draws before a transaction type counts as never drawn.
const MAX_DRAWS: u64 = 100_000;

/// One type's measured transactions in the child.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TypeRun {
    pub name: String,
    pub txns: u64,
}

/// The child: opens `workload` loaded as `glass bench` does ([`crate::run::open_loaded`]:
/// in memory, a directory holding the same load, or an empty one it loads), runs the warm-up
/// ([`crate::table4::warm_up`]), then measures `counts.txns` transactions of every type, one
/// dump per type drawn. Returns what was run.
pub fn run_child(
    workload: Arc<dyn Workload>,
    options: &WorkloadOptions,
    db_config: &DbConfig,
    counts: crate::table4::Counts,
    seed: u64,
) -> anyhow::Result<Vec<TypeRun>> {
    let (db, _) = open_loaded(
        "profile",
        workload.name(),
        workload.as_ref(),
        options,
        db_config,
        &Status::new(true),
    )?;
    let mut terminal = workload
        .terminal(&db, 0, 1, seed)
        .context("start a terminal")?;
    // Uninstrumented (`--instr-atstart=no`), so at valgrind's own speed.
    crate::table4::warm_up(&db, terminal.as_mut(), counts.warmup)?;
    client::start_instrumentation();
    let mut runs = Vec::new();
    for (t, name) in workload.txn_names().iter().enumerate() {
        let mut done = 0;
        'txns: for _ in 0..counts.txns {
            let mut draws = 0;
            while terminal.next() != t {
                draws += 1;
                if draws >= MAX_DRAWS {
                    break 'txns;
                }
            }
            measured_txn(&db, terminal.as_mut()).with_context(|| format!("{name} transaction"))?;
            done += 1;
        }
        if done > 0 {
            client::dump_stats_at(name);
            runs.push(TypeRun {
                name: name.to_string(),
                txns: done,
            });
        }
    }
    client::stop_instrumentation();
    drop(terminal);
    db.close().context("close the database")?;
    Ok(runs)
}

/// The parent: runs `exe args --child` under callgrind, writing `out/profile.callgrind*`,
/// and renders the per-type table. Without `out` the files go to a temporary directory that
/// is removed before returning.
pub fn run_parent(exe: &Path, args: &[String], out: Option<&Path>) -> anyhow::Result<String> {
    if let Err(why) = super::valgrind_version() {
        bail!("{why}");
    }
    let temporary = match out {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
            None
        }
        None => Some(
            tempfile::Builder::new()
                .prefix("glass-profile-")
                .tempdir()
                .context("create a temporary directory for the callgrind files")?,
        ),
    };
    let out = temporary
        .as_ref()
        .map(|dir| dir.path())
        .or(out)
        .context("no directory for the callgrind files")?;
    let file = out.join("profile.callgrind");
    // Killed with this process (`crate::child`): a profile under valgrind runs for minutes.
    let output = crate::child::owned(&mut Command::new("valgrind"), libc::SIGKILL)
        .args(super::callgrind_args(&file))
        .arg(exe)
        .args(args)
        .arg("--child")
        .output()
        .context("start valgrind")?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        bail!(
            "the profiled run failed ({}): {}",
            output.status,
            stderr.lines().rev().take(6).collect::<Vec<_>>().join(" | ")
        );
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('['))
        .context("the profiled run printed no result")?;
    let runs: Vec<TypeRun> = serde_json::from_str(line).context("parse the child's result")?;
    let mut table = String::new();
    let comps = Component::ALL;
    let _ = write!(table, "{:<14} {:>7} {:>12}", "type", "txns", "instr/txn");
    for c in comps {
        let _ = write!(table, " {:>12}", short(c));
    }
    table.push('\n');
    for (n, run) in runs.iter().enumerate() {
        let path = std::path::PathBuf::from(format!("{}.{}", file.display(), n + 1));
        let profile = Profile::read(&path)?;
        let per = |v: u64| v as f64 / run.txns.max(1) as f64;
        let split = profile.by_component();
        let _ = write!(
            table,
            "{:<14} {:>7} {:>12.0}",
            run.name,
            run.txns,
            per(profile.total)
        );
        for c in comps {
            let _ = write!(table, " {:>12.0}", per(split.get(&c).copied().unwrap_or(0)));
        }
        table.push('\n');
    }
    let _ = writeln!(
        table,
        "(instructions per transaction under callgrind, begin to commit; components by the crate \
         and module of each line's source, inlined code included; {})",
        match temporary {
            None => format!("callgrind files in {}", out.display()),
            Some(_) => "callgrind files removed: keep them with --out DIR".to_string(),
        }
    );
    Ok(table)
}

fn short(c: Component) -> &'static str {
    match c {
        Component::BufferManager => "buffer",
        Component::Index => "index",
        Component::Records => "records",
        Component::Latching => "latching",
        Component::Locking => "locking",
        Component::Logging => "logging",
        Component::KeysAndRecords => "keys+records",
        Component::TransactionEngine => "txn/engine",
        Component::UsefulWork => "useful",
        Component::Runtime => "runtime",
        Component::Other => "other",
    }
}
