//! The ladder's outputs: `ladder.json` (everything), `ladder.md` (the tables and findings) and
//! the figures (through [`crate::plot`]).
//!
//! Figure 8's time side: a native run has no per-function cycle counts without hardware
//! counters, so the time a component costs is measured by difference — time per transaction
//! at rung k−1 minus time at rung k is the time of what rung k removed — and shown beside the
//! instructions the same rung removed, both as shares of rung 0.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;

use super::measure::Phase;
use super::{LadderResult, RungResult};

/// The paper's numbers where its text gives them (Shore, §4.3 and Figures 5–7).
pub const PAPER_NEW_ORDER_TOP: f64 = 1_730_000.0;
pub const PAPER_PAYMENT_TOP: f64 = 180_000.0;

/// Instructions per transaction of `phase` at each rung (`None` where not measured).
pub fn instructions(result: &LadderResult, phase: Phase) -> Vec<Option<f64>> {
    result
        .rungs
        .iter()
        .map(|r| r.phase(phase).and_then(|p| p.instructions_per_txn))
        .collect()
}

/// Median µs per transaction of `phase` at each rung.
pub fn times(result: &LadderResult, phase: Phase) -> Vec<Option<f64>> {
    result
        .rungs
        .iter()
        .map(|r| r.phase(phase).and_then(|p| p.time_us_per_txn))
        .collect()
}

/// The phase Figure 8 uses: the mix if measured, else the first.
pub fn main_phase(result: &LadderResult) -> Phase {
    if result.config.phases.contains(&Phase::Mix) {
        Phase::Mix
    } else {
        result.config.phases[0]
    }
}

/// Per rung k ≥ 1: (share of rung 0's instructions removed by rung k, share of its time).
pub fn removed_shares(result: &LadderResult) -> Vec<(usize, Option<f64>, Option<f64>)> {
    let phase = main_phase(result);
    let ins = instructions(result, phase);
    let tim = times(result, phase);
    let share = |v: &[Option<f64>], k: usize| match (v[0], v[k - 1], v[k]) {
        (Some(top), Some(before), Some(after)) if top > 0.0 => Some((before - after) / top),
        _ => None,
    };
    (1..result.rungs.len())
        .map(|k| (k, share(&ins, k), share(&tim, k)))
        .collect()
}

fn fmt_count(v: Option<f64>) -> String {
    match v {
        None => "—".to_string(),
        Some(v) if v >= 1e6 => format!("{:.2} M", v / 1e6),
        Some(v) if v >= 1e4 => format!("{:.1} K", v / 1e3),
        Some(v) => format!("{v:.0}"),
    }
}

fn fmt_us(v: Option<f64>) -> String {
    v.map_or("—".to_string(), |v| format!("{v:.2}"))
}

fn fmt_share(v: Option<f64>) -> String {
    v.map_or("—".to_string(), |v| format!("{:.1}%", v * 100.0))
}

fn label(r: &RungResult) -> String {
    r.switch.clone().unwrap_or_else(|| "—".to_string())
}

/// Why removing `switch` can leave the instruction count flat (or raise it a little): what
/// the component costs on this path in the first place, and what replaces it.
pub fn flat_rung_reason(switch: &str) -> &'static str {
    match switch {
        "btree-keys" => {
            "The generic comparator's cost depends on key shape; with short all-integer keys \
             it is already close to the packed path."
        }
        "disk-log" => {
            "The ladder's log lives in memory, so a forced commit copies the log tail and \
             takes the group-commit latch: a few hundred instructions; unforced, the bytes are \
             dropped when the log buffer fills, by whichever operation's append fills it. On \
             a disk the saving is mostly the wait for the flush, which shows in time, not in \
             instructions."
        }
        "main-log" => {
            "Log records are built from byte ranges the buffer pool already tracks; what \
             remains after removing them (LSN hand-out) is the next rung."
        }
        "lsn" => "LSN bookkeeping is a few stores per page change and per transaction.",
        "locking" => {
            "Locks on this path are uncontended: a hash probe and a few stores each, and the \
             next-key lookups that go with them remain when the index does the same descent \
             anyway."
        }
        "latching" => {
            "Uncontended latches are one atomic read-modify-write to take and one to release; \
             single-threaded, they cost few instructions (their price is cache traffic between \
             cores, which callgrind does not count)."
        }
        "dir-lookup" => "The catalog lookup is one hash probe by table name per operation.",
        "small-page" => {
            "32 KiB pages make a tree shallower only where 8 KiB nodes' fan-out runs out: of the \
             trees the paper's mix touches on one warehouse, the order lines', whose inserts \
             skip the descent through \
             the transaction's leaf hints anyway. What is left is the cost of bigger nodes: \
             a node search over four times the keys takes a step or two more (the \"btree \
             lookup\" column), and a split, rarer, moves four times as much at once (in \
             lumps: count enough transactions). Against that, a heap page holds four times \
             the records (\"create record\" falls). The \"begin\" column moves with where \
             the per-transaction set-up's allocations land in the allocator."
        }
        "page-access" => {
            "The main-memory record store allocates each record on the heap and its ordered \
             index still descends a tree: the buffer manager's fixes are gone, tree searches \
             and allocation remain."
        }
        "xactions" => {
            "Per-transaction set-up is a few allocations and an insert into the registry of \
             running transactions, small against tens of thousands of instructions."
        }
        _ => "The switch removes little or nothing on this path, or its replacement costs as much.",
    }
}

/// What keeps the stripped engine (the last rung before the kernel) above the kernel, from
/// its operation split: the paper's operations, the prefetch hints, the procedure's own code
/// (against the kernel's whole transaction) and the rest of the `Tx` calls. `None` without
/// both rungs' splits.
fn stripped_gap(rungs: &[RungResult], p: Phase) -> Option<String> {
    let [.., stripped_rung, kernel_rung] = rungs else {
        return None;
    };
    let stripped = stripped_rung.phase(p)?;
    let kernel = kernel_rung.phase(p)?.instructions_per_txn?;
    let total = stripped.instructions_per_txn?;
    let get = |name: &str| {
        stripped
            .by_operation
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
    };
    let (hints, procedure, other) = (get("prefetch hints")?, get("procedure")?, get("other")?);
    let paper = total - hints - procedure - other;
    Some(format!(
        "- {}: the stripped engine (rung {}) runs {} instructions per transaction, {:.1}× the \
         kernel's {}: the paper's operations {}, the prefetch hints {}, the procedure's own code \
         {} ({:.1}× the kernel's whole transaction: its reads and writes go through `RowRef` and \
         `RowWriter`, which check each column's type and null bit, and its keys and rows are \
         built as `Value`s), and the rest of the `Tx` calls {} (packing keys, encoding rows, the \
         undo list, the session).",
        p.name(),
        stripped_rung.rung,
        fmt_count(Some(total)),
        total / kernel.max(1.0),
        fmt_count(Some(kernel)),
        fmt_count(Some(paper)),
        fmt_count(Some(hints)),
        fmt_count(Some(procedure)),
        procedure / kernel.max(1.0),
        fmt_count(Some(other)),
    ))
}

/// The Markdown report.
pub fn render_markdown(result: &LadderResult) -> String {
    let c = &result.config;
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# The removal ladder: TPC-C (the 2008 paper's variant)\n"
    );
    let _ = writeln!(
        md,
        "glass {} at {}; 1 warehouse ({} items, {} customers per district), {} measured \
         transactions per phase and rung after {} warm-up transactions, seed {}; in-memory \
         databases opened durable (commits force the in-memory log until `disk-log` is off), \
         one thread. Wall time {:.0} s.\n",
        result.glass_version,
        result.timestamp,
        c.items,
        c.customers,
        c.txns,
        c.warmup,
        c.seed,
        result.wall_s
    );
    match &result.valgrind {
        Ok(v) => {
            let _ = writeln!(
                md,
                "Instructions: {v}, callgrind counting only `measured_txn` (begin → run → \
                 commit) and, at rung 11, `Kernel::run_mix`, divided by the transactions run. \
                 Time: native runs of the same code, {} transactions per phase, monotonic \
                 clock around each measured transaction (rung 11: around `run_mix`), median \
                 of {} rounds (each rung once a round). \
                 From rung 9 on (`page-access` off) the engine acts on the procedures' \
                 prefetch hints (`Tx::prefetch`): a second index probe per row named, a few \
                 thousand instructions per New-Order, spent to overlap its cache misses. \
                 Up to rung 8 (on the buffer pool) each page read starts loading the \
                 frame's, header's, slot's and record's or cell's lines together \
                 (`BufferPool::prefetch_page`), some 10 K instructions per New-Order spent \
                 likewise.\n",
                c.native_txns,
                super::NATIVE_ROUNDS
            );
        }
        Err(why) => {
            let _ = writeln!(
                md,
                "**No instruction counts: {why}.** Native timings only.\n"
            );
        }
    }
    let phases = &c.phases;
    let mut head = "| rung | switch | what it removed |".to_string();
    let mut rule = "|---:|---|---|".to_string();
    for p in phases {
        let _ = write!(head, " {} instr/txn |", p.name());
        rule.push_str("---:|");
    }
    for p in phases {
        let _ = write!(head, " {} µs/txn |", p.name());
        rule.push_str("---:|");
    }
    head.push_str(" paper |");
    rule.push_str("---|");
    let _ = writeln!(md, "{head}\n{rule}");
    for r in &result.rungs {
        let mut row = format!("| {} | {} | {} |", r.rung, label(r), r.removes);
        for p in phases {
            let _ = write!(
                row,
                " {} |",
                fmt_count(r.phase(*p).and_then(|m| m.instructions_per_txn))
            );
        }
        for p in phases {
            let _ = write!(
                row,
                " {} |",
                fmt_us(r.phase(*p).and_then(|m| m.time_us_per_txn))
            );
        }
        let paper = match r.rung {
            0 => "New-Order ≈ 1.73 M, Payment ≈ 180 K (Shore, all on)",
            11 => "useful work ≈ 1/60 of rung 0",
            _ => "",
        };
        let _ = writeln!(row, " {paper} |");
        md.push_str(&row);
    }

    // Findings: rungs that do not lower the instruction count.
    let _ = writeln!(md, "\n## Findings\n");
    let mut findings = Vec::new();
    for p in phases {
        let ins = instructions(result, *p);
        for k in 1..ins.len() {
            if let (Some(before), Some(after)) = (ins[k - 1], ins[k]) {
                if after >= before * 0.995 {
                    let switch = label(&result.rungs[k]);
                    findings.push(format!(
                        "- Rung {k} (`{switch}`) does **not** lower {} instructions by 0.5% or more ({} → {}). \
                         {}",
                        p.name(),
                        fmt_count(Some(before)),
                        fmt_count(Some(after)),
                        flat_rung_reason(&switch)
                    ));
                }
            }
        }
        if let (Some(top), Some(bottom)) = (ins[0], ins[ins.len() - 1]) {
            findings.push(format!(
                "- {}: the kernel (rung 11) runs {} instructions per transaction, 1/{:.0} of \
                 the full engine's {} (the paper: useful work ≈ 1/60).",
                p.name(),
                fmt_count(Some(bottom)),
                top / bottom.max(1.0),
                fmt_count(Some(top))
            ));
        }
        if let Some(line) = stripped_gap(&result.rungs, *p) {
            findings.push(line);
        }
    }
    for r in &result.rungs {
        if let Some(e) = &r.callgrind_error {
            findings.push(format!("- Rung {} under callgrind failed: {e}", r.rung));
        }
        if let Some(e) = &r.native_error {
            findings.push(format!("- Rung {} native run failed: {e}", r.rung));
        }
    }
    if findings.is_empty() {
        findings.push("- Every rung lowers the instruction count.".to_string());
    }
    let _ = writeln!(md, "{}", findings.join("\n"));

    // Figure 8: removed shares.
    let phase = main_phase(result);
    let _ = writeln!(
        md,
        "\n## What each rung removed: instructions vs time (Figure 8, {})\n",
        phase.name()
    );
    let _ = writeln!(
        md,
        "Shares of rung 0. Time per component is measured by difference (time at rung k−1 \
         minus time at rung k is what rung k removed): a native run cannot attribute cycles \
         to functions without hardware counters. A component whose time share exceeds its \
         instruction share runs at a lower IPC (cache misses, pointer chasing, atomics).\n"
    );
    let _ = writeln!(
        md,
        "| rung | switch | removed instructions | removed time |"
    );
    let _ = writeln!(md, "|---:|---|---:|---:|");
    for (k, ins, time) in removed_shares(result) {
        let _ = writeln!(
            md,
            "| {k} | {} | {} | {} |",
            label(&result.rungs[k]),
            fmt_share(ins),
            fmt_share(time)
        );
    }

    // Per-operation split (Figures 5 and 6).
    for p in phases {
        let _ = writeln!(
            md,
            "\n## {} instructions per transaction by operation (Figures 5/6)\n",
            p.name()
        );
        let ops: Vec<String> = result
            .rungs
            .iter()
            .find_map(|r| r.phase(*p).filter(|m| !m.by_operation.is_empty()))
            .map(|m| m.by_operation.iter().map(|(n, _)| n.clone()).collect())
            .unwrap_or_default();
        if ops.is_empty() {
            let _ = writeln!(md, "(not measured)");
            continue;
        }
        let _ = writeln!(md, "| rung | {} |", ops.join(" | "));
        let _ = writeln!(md, "|---:|{}", "---:|".repeat(ops.len()));
        for r in &result.rungs {
            if let Some(m) = r.phase(*p) {
                let cells: Vec<String> = m
                    .by_operation
                    .iter()
                    .map(|(_, v)| fmt_count(Some(*v)))
                    .collect();
                if !cells.is_empty() {
                    let _ = writeln!(md, "| {} | {} |", r.rung, cells.join(" | "));
                }
            }
        }
    }

    // Per-component split.
    let _ = writeln!(
        md,
        "\n## {} instructions per transaction by component (self cost by the crate and module of each \
         line's source, inlined code included)\n",
        phase.name()
    );
    let comps: Vec<String> = result
        .rungs
        .iter()
        .find_map(|r| r.phase(phase).filter(|m| !m.by_component.is_empty()))
        .map(|m| m.by_component.iter().map(|(n, _)| n.clone()).collect())
        .unwrap_or_default();
    if !comps.is_empty() {
        let _ = writeln!(md, "| rung | {} |", comps.join(" | "));
        let _ = writeln!(md, "|---:|{}", "---:|".repeat(comps.len()));
        for r in &result.rungs {
            if let Some(m) = r.phase(phase).filter(|m| !m.by_component.is_empty()) {
                let cells: Vec<String> = m
                    .by_component
                    .iter()
                    .map(|(_, v)| fmt_count(Some(*v)))
                    .collect();
                let _ = writeln!(md, "| {} | {} |", r.rung, cells.join(" | "));
            }
        }
    }
    md
}

/// Writes `ladder.json`, `ladder.md` and the figures into `dir`.
pub fn write_all(result: &LadderResult, dir: &Path) -> anyhow::Result<()> {
    let json = serde_json::to_string_pretty(result).context("serialise the ladder")?;
    std::fs::write(dir.join("ladder.json"), json + "\n")
        .with_context(|| format!("write {}", dir.join("ladder.json").display()))?;
    std::fs::write(dir.join("ladder.md"), render_markdown(result))
        .with_context(|| format!("write {}", dir.join("ladder.md").display()))?;
    crate::plot::ladder_figures(result, dir)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::PhaseMeasure;
    use super::*;
    use engine::Switch;

    fn rung(k: usize, total: f64, ops: &[(&str, f64)]) -> RungResult {
        RungResult {
            rung: k,
            switch: None,
            removes: String::new(),
            phases: vec![PhaseMeasure {
                phase: Phase::NewOrder.name().to_string(),
                txns: 10,
                instructions_per_txn: Some(total),
                by_operation: ops.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
                ..PhaseMeasure::default()
            }],
            callgrind_error: None,
            native_error: None,
            callgrind_s: None,
            load_s: None,
        }
    }

    #[test]
    fn the_stripped_gap_splits_the_last_engine_rung_against_the_kernel() {
        let stripped = rung(
            10,
            40_000.0,
            &[
                ("btree lookup", 6_000.0),
                ("insert index", 4_000.0),
                ("prefetch hints", 7_000.0),
                ("procedure", 9_000.0),
                ("other", 14_000.0),
            ],
        );
        let kernel = rung(11, 2_000.0, &[("procedure", 2_000.0), ("other", 0.0)]);
        let line = stripped_gap(&[stripped.clone(), kernel], Phase::NewOrder).unwrap();
        assert!(line.contains("rung 10"), "{line}");
        assert!(line.contains("20.0× the kernel's 2000"), "{line}");
        assert!(line.contains("the paper's operations 10.0 K"), "{line}");
        assert!(line.contains("the prefetch hints 7000"), "{line}");
        assert!(line.contains("own code 9000 (4.5×"), "{line}");
        assert!(line.contains("the rest of the `Tx` calls 14.0 K"), "{line}");
        // Without the kernel's count, or with one rung only, there is nothing to compare.
        assert_eq!(
            stripped_gap(std::slice::from_ref(&stripped), Phase::NewOrder),
            None
        );
        assert_eq!(stripped_gap(&[stripped], Phase::Payment), None);
    }

    #[test]
    fn every_switch_has_its_own_reason_for_a_flat_rung() {
        let fallback = flat_rung_reason("no such switch");
        let mut seen = std::collections::HashSet::new();
        for s in Switch::LADDER {
            let reason = flat_rung_reason(s.name());
            assert_ne!(reason, fallback, "switch {} has no reason", s.name());
            assert!(seen.insert(reason), "switch {} repeats a reason", s.name());
        }
    }
}
