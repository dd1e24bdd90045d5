//! `glass profile WORKLOAD --instructions`: any workload, any configuration, under callgrind;
//! instructions per transaction by type and component.
//!
//! ```text
//!   parent: valgrind (callgrind_args) glass profile ... --child   ─► OUT/profile.callgrind.N
//!   child:  open + load (uninstrumented) ─► one terminal ─► for each transaction type t:
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
use engine::db::{Database, DbConfig};
use serde::{Deserialize, Serialize};
use workloads::Workload;

use super::measure::measured_txn;
use crate::callgrind::{client, Component, Profile};

/// Draws before a transaction type counts as never drawn.
const MAX_DRAWS: u64 = 100_000;

/// One type's measured transactions in the child.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TypeRun {
    pub name: String,
    pub txns: u64,
}

/// The child: loads `workload` into a database opened with `db_config`, then measures
/// `txns` transactions of every type, one dump per type drawn. Returns what was run.
pub fn run_child(
    workload: Arc<dyn Workload>,
    db_config: &DbConfig,
    txns: u64,
    seed: u64,
) -> anyhow::Result<Vec<TypeRun>> {
    let db = Database::open(db_config.clone()).context("open the database")?;
    workload.create_schema(&db).context("create the schema")?;
    workload.load(&db, &|_, _| {}).context("load")?;
    db.finish_load();
    let mut terminal = workload
        .terminal(&db, 0, 1, seed)
        .context("start a terminal")?;
    for _ in 0..txns.min(200) {
        terminal.next();
        measured_txn(&db, terminal.as_mut()).context("warm-up transaction")?;
    }
    client::start_instrumentation();
    let mut runs = Vec::new();
    for (t, name) in workload.txn_names().iter().enumerate() {
        let mut done = 0;
        'txns: for _ in 0..txns {
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
/// and renders the per-type table.
pub fn run_parent(exe: &Path, args: &[String], out: &Path) -> anyhow::Result<String> {
    if let Err(why) = super::valgrind_version() {
        bail!("{why}");
    }
    std::fs::create_dir_all(out).with_context(|| format!("create {}", out.display()))?;
    let file = out.join("profile.callgrind");
    let output = Command::new("valgrind")
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
         and module of each line's source, inlined code included; callgrind files in {})",
        out.display()
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
