//! The ack log: every acknowledged commit of a run, written as it is acknowledged, and the
//! check that each one survived a crash (`glass bench --ack-log FILE`, `glass check --ack-log
//! FILE`).
//!
//! A commit is acknowledged when `commit` returned to the terminal. Right then the run appends
//! the transaction's [`Receipt`]s — the rows it inserted that nothing later removes, or the rows
//! it deleted for good — to the file, in one `write` on a file opened for appending (no
//! `fsync`: the page cache keeps it across a `kill -9` of the process, and the file is read
//! after the process died, not after the machine did). A crash between the commit and that
//! write leaves the commit unrecorded, never a record of a commit that did not return. Read-only
//! transactions and those whose effects later commits overwrite (a balance, a YCSB field)
//! leave no receipt.
//!
//! ```text
//!   glass-ack-log 1                 first line: format and version
//!   run tpcc durable                each run that appended: its workload, durable or not
//!   + orders 1 3 3001               a row that must be there: table, key columns
//!   - new_order 1 1 2101            a row that must be gone
//! ```
//!
//! Several runs may append to one file (a crash campaign does), each under its own `run` line.
//! After a crash, [`verify`] looks every receipt up. A durable run's missing receipt is a lost
//! commit: a failure. A non-durable run may lose its last unforced commits by design: those
//! are counted and reported, not failed. A last line without its newline (a write cut short by
//! the kill) is ignored; any other malformed line is an error naming its line number.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use engine::db::Database;
use engine::{Fetch, Tx, TxError, TxResult, Value};
use workloads::{Receipt, Terminal};

use crate::driver::{Attempt, Executor};

const MAGIC: &str = "glass-ack-log 1";

/// An ack log open for appending.
pub struct AckLog {
    file: File,
    path: PathBuf,
}

impl AckLog {
    /// Opens `path` for appending (creating it with its first line if absent or empty) and
    /// starts a run of `workload`. An existing file must be an ack log of the same workload.
    pub fn open(path: &Path, workload: &str, durable: bool) -> anyhow::Result<AckLog> {
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .with_context(|| format!("open the ack log {}", path.display()))?;
        let mut text = String::new();
        file.read_to_string(&mut text)
            .with_context(|| format!("read the ack log {}", path.display()))?;
        let mut head = String::new();
        if text.is_empty() || (!text.contains('\n') && MAGIC.starts_with(text.as_str())) {
            // New, or its first write was cut short.
            file.set_len(0)
                .with_context(|| format!("empty the ack log {}", path.display()))?;
            head.push_str(MAGIC);
            head.push('\n');
        } else {
            let parsed = parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            if let Some(other) = parsed.runs.iter().find(|r| r.workload != workload) {
                anyhow::bail!(
                    "{} records {} runs, not {workload}: use another file",
                    path.display(),
                    other.workload
                );
            }
            if !text.ends_with('\n') {
                // The last write was cut short by a crash: drop what it wrote.
                let keep = text.rfind('\n').map_or(0, |at| at + 1);
                file.set_len(keep as u64)
                    .with_context(|| format!("cut the torn last line of {}", path.display()))?;
            }
        }
        let durability = if durable { "durable" } else { "not-durable" };
        head.push_str(&format!("run {workload} {durability}\n"));
        file.write_all(head.as_bytes())
            .with_context(|| format!("write the ack log {}", path.display()))?;
        Ok(AckLog {
            file,
            path: path.to_path_buf(),
        })
    }

    /// Appends one acknowledged transaction's receipts, in one write.
    pub fn record(&self, receipts: &[Receipt]) -> io::Result<()> {
        let mut line = String::with_capacity(48 * receipts.len());
        for r in receipts {
            line.push(if r.present { '+' } else { '-' });
            line.push(' ');
            line.push_str(&r.table);
            for k in &r.key {
                line.push(' ');
                line.push_str(&k.to_string());
            }
            line.push('\n');
        }
        (&self.file).write_all(line.as_bytes())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// An executor that appends each committed transaction's receipts to an ack log once `inner`
/// has committed it. A failed write ends the run with an error naming the file.
pub struct AckingExecutor<'a> {
    pub inner: &'a dyn Executor,
    pub log: &'a AckLog,
}

impl Executor for AckingExecutor<'_> {
    fn idle(&self, worker: usize) {
        self.inner.idle(worker);
    }

    fn measuring(&self) {
        self.inner.measuring();
    }

    fn execute(&self, attempt: Attempt, terminal: &mut dyn Terminal) -> TxResult<()> {
        self.inner.execute(attempt, terminal)?;
        let mut receipts = Vec::new();
        terminal.receipts(&mut receipts);
        if receipts.is_empty() {
            return Ok(());
        }
        self.log.record(&receipts).map_err(|e| {
            TxError::Storage(storage::StorageError::io(
                "append to the ack log (the commit itself succeeded)",
                e,
            ))
        })
    }
}

/// One run's section of an ack log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AckRun {
    pub workload: String,
    pub durable: bool,
    /// (line number, receipt).
    pub receipts: Vec<(usize, Receipt)>,
}

/// A parsed ack log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AckLogContents {
    pub runs: Vec<AckRun>,
}

/// Parses an ack log's bytes (see [`parse`]); bytes that are not UTF-8 are an error.
pub fn parse_bytes(bytes: &[u8]) -> Result<AckLogContents, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not an ack log: {e}"))?;
    parse(text)
}

/// Parses an ack log's text. Never panics; a malformed line is an error naming it.
pub fn parse(text: &str) -> Result<AckLogContents, String> {
    let mut lines = text.split_inclusive('\n').enumerate();
    match lines.next() {
        None => return Ok(AckLogContents::default()),
        Some((_, first)) if first.trim_end_matches('\n') == MAGIC => {}
        Some(_) => return Err(format!("not an ack log (its first line is not '{MAGIC}')")),
    }
    let mut runs: Vec<AckRun> = Vec::new();
    for (i, raw) in lines {
        let number = i + 1;
        let Some(line) = raw.strip_suffix('\n') else {
            break; // the last write, cut short by a crash
        };
        if line.is_empty() {
            continue;
        }
        let mut words = line.split(' ');
        let bad = |why: &str| format!("line {number}: {why}: '{}'", shorten(line));
        match words.next() {
            Some("run") => {
                let workload = words.next().filter(|w| !w.is_empty());
                let durable = match words.next() {
                    Some("durable") => true,
                    Some("not-durable") => false,
                    _ => return Err(bad("a run line ends in 'durable' or 'not-durable'")),
                };
                let (Some(workload), None) = (workload, words.next()) else {
                    return Err(bad("a run line is 'run WORKLOAD durable|not-durable'"));
                };
                runs.push(AckRun {
                    workload: workload.to_string(),
                    durable,
                    receipts: Vec::new(),
                });
            }
            Some(sign @ ("+" | "-")) => {
                let Some(run) = runs.last_mut() else {
                    return Err(bad("a receipt before any run line"));
                };
                let table = match words.next() {
                    Some(t) if !t.is_empty() => t.to_string(),
                    _ => return Err(bad("a receipt names its table")),
                };
                let key = words
                    .map(str::parse::<i64>)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|_| bad("key columns are integers"))?;
                if key.is_empty() || key.len() > 16 {
                    return Err(bad("a receipt has 1 to 16 key columns"));
                }
                run.receipts.push((
                    number,
                    Receipt {
                        table,
                        key,
                        present: sign == "+",
                    },
                ));
            }
            _ => return Err(bad("expected 'run', '+' or '-'")),
        }
    }
    Ok(AckLogContents { runs })
}

fn shorten(line: &str) -> String {
    match line.char_indices().nth(60) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_string(),
    }
}

/// What [`verify`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AckReport {
    pub runs: usize,
    /// Receipts of durable runs, and those not found as recorded (line, receipt).
    pub durable: usize,
    pub durable_missing: Vec<(usize, Receipt)>,
    /// Receipts of non-durable runs, and how many were not found (allowed: their last
    /// unforced commits).
    pub not_durable: usize,
    pub not_durable_missing: usize,
}

impl AckReport {
    /// Whether every durable run's acknowledged commit is present.
    pub fn holds(&self) -> bool {
        self.durable_missing.is_empty()
    }

    /// Lines for the user: the summary, then each lost commit (the first 20).
    pub fn render(&self) -> String {
        let mut out = format!(
            "ack log: {} run{}; {} acknowledged durable commit receipt{} checked, {} missing",
            self.runs,
            if self.runs == 1 { "" } else { "s" },
            self.durable,
            if self.durable == 1 { "" } else { "s" },
            self.durable_missing.len()
        );
        if self.not_durable > 0 {
            out.push_str(&format!(
                "; {} non-durable receipt{} checked, {} missing (a non-durable run may lose its \
                 last unforced commits)",
                self.not_durable,
                if self.not_durable == 1 { "" } else { "s" },
                self.not_durable_missing
            ));
        }
        for (line, r) in self.durable_missing.iter().take(20) {
            let key: Vec<String> = r.key.iter().map(i64::to_string).collect();
            out.push_str(&format!(
                "\n✗ lost acknowledged commit (ack log line {line}): {} row ({}) {}",
                r.table,
                key.join(", "),
                if r.present { "is missing" } else { "is back" }
            ));
        }
        if self.durable_missing.len() > 20 {
            out.push_str(&format!("\n… and {} more", self.durable_missing.len() - 20));
        }
        out
    }
}

/// Looks up every receipt of the ack log at `path` in `db` (of workload `workload`).
pub fn verify(db: &Database, workload: &str, path: &Path) -> anyhow::Result<AckReport> {
    let bytes =
        std::fs::read(path).with_context(|| format!("read the ack log {}", path.display()))?;
    let contents = parse_bytes(&bytes).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let mut report = AckReport {
        runs: contents.runs.len(),
        ..AckReport::default()
    };
    for run in &contents.runs {
        if run.workload != workload {
            anyhow::bail!(
                "{} records a {} run, not {workload}",
                path.display(),
                run.workload
            );
        }
        // Many lookups per transaction: a check of a long campaign's log stays quick.
        for chunk in run.receipts.chunks(1000) {
            let found = db
                .run(|tx| {
                    let mut found = Vec::with_capacity(chunk.len());
                    for (_, r) in chunk {
                        let table = db.table(&r.table)?;
                        let key: Vec<Value> = r.key.iter().map(|k| Value::Int(*k)).collect();
                        found.push(tx.get(&table, &key, Fetch::Cols(&[0]), false)?.is_some());
                    }
                    Ok(found)
                })
                .with_context(|| format!("look up the receipts of {}", path.display()))?;
            for ((line, r), there) in chunk.iter().zip(found) {
                let kept = there == r.present;
                if run.durable {
                    report.durable += 1;
                    if !kept {
                        report.durable_missing.push((*line, r.clone()));
                    }
                } else {
                    report.not_durable += 1;
                    report.not_durable_missing += usize::from(!kept);
                }
            }
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_parses_back_to_what_was_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("acks");
        {
            let log = AckLog::open(&path, "tpcc", true).unwrap();
            log.record(&[Receipt::present("orders", &[1, 3, 3001])])
                .unwrap();
            log.record(&[
                Receipt::absent("new_order", &[1, 1, 2101]),
                Receipt::absent("new_order", &[1, 2, 2101]),
            ])
            .unwrap();
        }
        AckLog::open(&path, "tpcc", false).unwrap();
        let parsed = parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(parsed.runs.len(), 2);
        assert!(parsed.runs[0].durable && !parsed.runs[1].durable);
        let receipts: Vec<_> = parsed.runs[0].receipts.iter().map(|r| &r.1).collect();
        assert_eq!(
            receipts,
            [
                &Receipt::present("orders", &[1, 3, 3001]),
                &Receipt::absent("new_order", &[1, 1, 2101]),
                &Receipt::absent("new_order", &[1, 2, 2101]),
            ]
        );
        assert_eq!(parsed.runs[0].receipts[1].0, 4, "line numbers count from 1");
    }

    #[test]
    fn another_workloads_log_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("acks");
        AckLog::open(&path, "tpcb", true).unwrap();
        let err = AckLog::open(&path, "tpcc", true).err().unwrap().to_string();
        assert!(err.contains("tpcb runs, not tpcc"), "{err}");
    }

    #[test]
    fn a_cut_last_line_is_ignored_and_the_next_run_starts_on_a_new_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("acks");
        std::fs::write(
            &path,
            format!("{MAGIC}\nrun ycsb durable\n+ usertable 7\n+ userta"),
        )
        .unwrap();
        let parsed = parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(parsed.runs[0].receipts.len(), 1);
        let log = AckLog::open(&path, "ycsb", true).unwrap();
        log.record(&[Receipt::present("usertable", &[8])]).unwrap();
        let parsed = parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(parsed.runs.len(), 2);
        assert_eq!(parsed.runs[1].receipts[0].1.key, [8]);
    }

    #[test]
    fn a_file_that_is_no_ack_log_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes");
        std::fs::write(&path, "my notes").unwrap();
        let err = AckLog::open(&path, "tpcc", true).err().unwrap().to_string();
        assert!(err.contains("not an ack log"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "my notes");
    }

    #[test]
    fn malformed_lines_are_errors_naming_the_line() {
        for (text, needle) in [
            ("something else\n", "not an ack log"),
            (
                "glass-ack-log 1\n+ orders 1\n",
                "line 2: a receipt before any run line",
            ),
            ("glass-ack-log 1\nrun tpcc maybe\n", "line 2"),
            (
                "glass-ack-log 1\nrun tpcc durable\n+ orders 1 x\n",
                "line 3: key columns",
            ),
            (
                "glass-ack-log 1\nrun tpcc durable\n+ orders\n",
                "line 3: a receipt has 1",
            ),
            (
                "glass-ack-log 1\nrun tpcc durable\n* orders 1\n",
                "line 3: expected",
            ),
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.contains(needle), "{text:?}: {err}");
        }
    }
}
