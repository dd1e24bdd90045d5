//! `glass isolation`: the 2025 paper's Figures 6 and 7 (what isolating stored procedures from
//! the engine costs) on this machine, from one command. For each workload (YCSB-C, Voter,
//! TPC-C) and each isolation level and channel, a `glass serve --isolation LEVEL --channel C
//! --trace` child pinned to one core, one worker, clients on the other core:
//!
//! ```text
//!   Figure 7  per workload and level: the server's time per transaction in each phase, the
//!             isolation overhead (phase 5) among them, and its share of the transaction
//!   Figure 6  per workload: median and p99 latency against throughput, a line per level
//!             (open-loop loads at fractions of each level's closed-loop peak)
//! ```
//!
//! The levels are those built: `none` (procedures from a shared library, called directly: the
//! paper's baseline; `cargo build --release -p procedures-native` first), `rust` (compiled
//! into the server), `wasm` (in the server, in a WebAssembly
//! sandbox; its module must be built, see `procedures-wasm`), `process` over each channel, and
//! `container` over Unix sockets; `vm` (a virtual machine per worker, over a virtio-serial
//! port or TCP) when named in `--levels`, as it needs QEMU and a guest kernel
//! (`bench/vm/prepare.sh`). The worker and its procedure process share the server's
//! core (the child inherits its affinity), as a worker and its paired process would when
//! every core has a worker; `shm-poll` therefore spins only briefly before it yields (see
//! `server::isolation`).
//!
//! Ctrl-C or SIGTERM ([`crate::driver::interrupt_flag`]) ends it in order: the workload then
//! measuring is left out (its figures need every level), no workload after it runs, and the
//! report and JSON hold the workloads measured before it, saying so.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::{json, Value as Json};

use crate::plot::{line_figure, stacked_bars, Line, Lines};
use crate::remote::{run_remote_uncut, Mode};
use crate::run::BenchConfig;
use crate::section3::{self, PaperReport, Section3Config, ServerProc, Spec};

/// How the experiment runs.
#[derive(Clone, Debug)]
pub struct IsolationConfig {
    /// Where the servers come from, where the output goes, cores, durations, connections,
    /// YCSB records and workloads: as `glass section3`'s.
    pub run: Section3Config,
    /// (level, channel) pairs, e.g. ("process", "uds").
    pub levels: Vec<(String, String)>,
    /// Fractions of each level's closed-loop peak offered for Figure 6.
    pub steps: Vec<f64>,
    /// The core procedure processes run on; `None`: the server's.
    pub procedure_core: Option<usize>,
    /// Closed-loop peaks measured per level, in rounds that each run every level once
    /// (interleaved); the report gives the median and the range. The latency steps run once.
    pub rounds: u32,
    /// `glass serve` flags for the `vm` level (`--vm-accel`, `--vm-guest`).
    pub vm_args: Vec<String>,
}

/// The levels and channels this command runs by default: every one built.
pub fn default_levels() -> Vec<(String, String)> {
    let mut levels = vec![
        ("none".to_string(), "-".to_string()),
        ("rust".to_string(), "-".to_string()),
        ("wasm".to_string(), "-".to_string()),
    ];
    for channel in ["tcp", "uds", "shm-uds", "shm-poll"] {
        levels.push(("process".to_string(), channel.to_string()));
    }
    levels.push(("container".to_string(), "uds".to_string()));
    levels
}

/// Parses `rust,process:tcp,container:uds,...`.
pub fn parse_levels(list: &str) -> Result<Vec<(String, String)>, String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|item| {
            let (level, channel) = item.split_once(':').unwrap_or((item, "-"));
            let level: server::Isolation = level.parse()?;
            if level.out_of_process() {
                let channel: server::Channel = if channel == "-" {
                    level.default_channel()
                } else {
                    channel.parse()?
                };
                level.check_channel(channel)?;
                Ok((level.to_string(), channel.to_string()))
            } else if channel != "-" {
                Err(format!(
                    "{level} runs procedures in the server: no channel ({item})"
                ))
            } else {
                Ok((level.to_string(), "-".to_string()))
            }
        })
        .collect()
}

fn label(level: &(String, String)) -> String {
    if level.1 == "-" {
        level.0.clone()
    } else {
        format!("{} {}", level.0, level.1)
    }
}

/// The paper's Figure 7 findings, quoted beside ours.
const PAPER_FIG7: &str = "isolation overhead (TCP) 58%, 70% and 63% of server CPU for YCSB-C, \
Voter and TPC-C; Unix sockets about 32% below TCP; shared memory with polling still 31-66% \
above no isolation; no isolation up to 65% ahead of the next best";

/// One level's measurement of one workload.
struct Cell {
    label: String,
    /// The median round's throughput, and every round's.
    tps: f64,
    tps_rounds: Vec<f64>,
    p50_us: u64,
    p99_us: u64,
    trace: Json,
    points: Vec<Step>,
}

/// One step of Figure 6: (offered, achieved, p50, p99).
type Step = (f64, f64, u64, u64);

fn us(trace: &Json, phase: &str) -> f64 {
    trace["us_per_txn"][phase].as_f64().unwrap_or(0.0)
}

/// What `shm-poll` does where the server runs pinned to `server_core` and its procedure
/// processes on `procedure_core` (the server's own where `None`): the rule its workers apply
/// ([`server::isolation::spin_for`]), said in the report so that a figure says whether it
/// measured polling.
fn shm_poll_note(server_core: usize, procedure_core: Option<usize>) -> String {
    let spin = server::isolation::spin_for(&[server_core], procedure_core);
    let nap_after = server::isolation::YIELD.as_millis();
    if spin.is_zero() {
        format!(
            "`shm-poll`: the worker and its procedure process share one core, so neither \
             spins: each yields at once and naps after {nap_after} ms (a spinning side would \
             keep its peer from answering).\n\n"
        )
    } else {
        format!(
            "`shm-poll`: the worker and its procedure process have a core each, so both spin \
             on the channel for {} µs before they yield, and nap after {nap_after} ms.\n\n",
            spin.as_micros()
        )
    }
}

/// Runs the experiment; writes isolation.md, isolation.json and the figures into `out`, and
/// returns the report.
pub fn run_isolation(config: &IsolationConfig) -> anyhow::Result<PaperReport> {
    let run = &config.run;
    std::fs::create_dir_all(&run.out).with_context(|| format!("create {}", run.out.display()))?;
    if config.levels.is_empty() {
        anyhow::bail!(crate::UsageError("--levels names no level".into()));
    }
    // Before this process pins itself, which narrows what it sees.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if let Some(core) = config.procedure_core.filter(|&c| c >= cores) {
        anyhow::bail!(crate::UsageError(format!(
            "--procedure-core {core} does not exist: this machine has {cores} cores"
        )));
    }
    section3::pin_clients(run)?;
    let watch = crate::machine_cpu::Watch::start();
    let specs: Vec<Spec> = section3::specs(run)
        .into_iter()
        .filter(|s| run.workloads.iter().any(|w| w == s.name))
        .collect();
    let mut report = format!(
        "# What isolating stored procedures costs (the 2025 paper's Figures 6 and 7)\n\n\
         Each run: `glass serve --isolation LEVEL --channel CHANNEL --trace`, one dedicated \
         worker, pinned to core {}; its procedure process on {}; {} closed-loop connections \
         of stored-procedure calls on core {}, {} s a run, {} round(s) of every level \
         (interleaved; the median shown, every round beside it). \"vs none\" compares each level's \
         throughput with `none` (procedures loaded from a shared library and called \
         directly), or with `rust` where `none` did not run.\n\n",
        run.server_core,
        config
            .procedure_core
            .map_or("the same core".to_string(), |c| format!("core {c}")),
        run.connections,
        run.client_core,
        run.duration,
        config.rounds.max(1)
    );
    if config.levels.iter().any(|l| l.1 == "shm-poll") {
        report.push_str(&shm_poll_note(run.server_core, config.procedure_core));
    }
    if config.levels.iter().any(|l| l.0 == "vm") {
        report.push_str(&if config.vm_args.iter().any(|a| a == "tcg") {
            "`vm`: each worker's procedure process in a virtual machine of its own under QEMU's \
             software emulation (`--vm-accel tcg`): the boundary a VM puts around a procedure, \
             with the procedure's own code run many times slower than under KVM; not a \
             measurement of the paper's KVM guests.\n\n"
                .to_string()
        } else {
            "`vm`: each worker's procedure process in a KVM guest of its own, over a \
             virtio-serial port (`virtio`) or TCP over the guest's network (`tcp`).\n\n"
                .to_string()
        });
    }
    let idle = crate::cpu_idle::CpuIdle::probe();
    if let Some(line) = idle.note(true) {
        report.push_str(&format!("{line}.\n\n"));
    }
    let mut all = Vec::new();
    // The workload Ctrl-C or SIGTERM ended, if it did.
    let mut cut = None;
    'workloads: for spec in &specs {
        // Round by round, every level once a round, so that a slow minute of a shared
        // machine does not fall on one level alone.
        let mut peaks: Vec<Vec<Peak>> = config.levels.iter().map(|_| Vec::new()).collect();
        for round in 0..config.rounds.max(1) {
            for (i, level) in config.levels.iter().enumerate() {
                let Some(p) = peak(config, spec, level, round)? else {
                    cut = Some(spec.name);
                    break 'workloads;
                };
                peaks[i].push(p);
            }
        }
        let mut cells = Vec::new();
        for (level, mut runs) in config.levels.iter().zip(peaks) {
            let tps_rounds: Vec<f64> = runs.iter().map(|p| p.tps).collect();
            runs.sort_by(|a, b| a.tps.total_cmp(&b.tps));
            let median = runs.swap_remove(runs.len() / 2);
            let Some(points) = steps(config, spec, level, median.tps)? else {
                cut = Some(spec.name);
                break 'workloads;
            };
            // An emulated VM says so wherever its numbers appear.
            let emulated = level.0 == "vm" && config.vm_args.iter().any(|a| a == "tcg");
            cells.push(Cell {
                label: if emulated {
                    format!("{} (tcg)", label(level))
                } else {
                    label(level)
                },
                tps: median.tps,
                tps_rounds,
                p50_us: median.p50_us,
                p99_us: median.p99_us,
                trace: median.trace,
                points,
            });
        }
        report.push_str(&figure7(spec.name, &cells, &run.out)?);
        report.push_str(&figure6(spec.name, &cells, &run.out)?);
        all.push(json!({
            "workload": spec.name,
            "levels": cells.iter().map(|c| json!({
                "level": c.label,
                "tps": c.tps,
                "tps_rounds": c.tps_rounds,
                "p50_us": c.p50_us,
                "p99_us": c.p99_us,
                "trace": c.trace,
                "points": c.points.iter().map(|p| json!({
                    "offered_tps": p.0, "achieved_tps": p.1, "p50_us": p.2, "p99_us": p.3,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        }));
    }
    if let Some(workload) = cut {
        eprintln!("isolation: interrupted during {workload}; left out, nothing after it ran");
        report.push_str(&format!(
            "**Interrupted (Ctrl-C or SIGTERM) during {workload}**: it is left out (its \
             figures need every level), and nothing after it ran.\n\n"
        ));
    }
    let others = watch.share();
    if let Some(line) = others.and_then(crate::machine_cpu::report_note) {
        report.push_str(&format!("{line}.\n\n"));
    }
    report.push_str(&format!("The paper (Figure 7): {PAPER_FIG7}.\n"));
    write(&run.out.join("isolation.md"), &report)?;
    write(
        &run.out.join("isolation.json"),
        &serde_json::to_string_pretty(&json!({
            "connections": run.connections,
            "duration_s": run.duration,
            "server_core": run.server_core,
            "client_core": run.client_core,
            "cpu_idle": idle,
            "others_cpu_share": others,
            "workloads": all,
            "interrupted": cut.map_or(json!(false), |w| json!({ "during": w })),
        }))?,
    )?;
    Ok(PaperReport {
        text: report,
        interrupted: cut.map(str::to_string),
    })
}

/// One closed-loop run at a level: its throughput, latency and the server's trace.
struct Peak {
    tps: f64,
    p50_us: u64,
    p99_us: u64,
    trace: Json,
}

/// `glass serve` at `level`, as the experiment starts it.
fn server_args<'a>(
    config: &'a IsolationConfig,
    level: &'a (String, String),
    core: &'a Option<String>,
) -> Vec<&'a str> {
    let mut args = vec![
        "--listen",
        "127.0.0.1:0",
        "--arch",
        "dedicated",
        "--workers",
        "1",
        "--isolation",
        level.0.as_str(),
    ];
    if level.1 != "-" {
        args.extend(["--channel", level.1.as_str()]);
        if let (Some(core), Some(_)) = (core, config.procedure_core) {
            args.extend(["--procedure-core", core.as_str()]);
        }
    }
    if level.0 == "vm" {
        args.extend(config.vm_args.iter().map(String::as_str));
    }
    args
}

/// A server at `level` and its closed-loop peak, traced; `None` where Ctrl-C or SIGTERM cut
/// the run short.
fn peak(
    config: &IsolationConfig,
    spec: &Spec,
    level: &(String, String),
    round: u32,
) -> anyhow::Result<Option<Peak>> {
    let run = &config.run;
    let tag = format!("{}-{round}", label(level).replace(' ', "-"));
    eprintln!(
        "isolation: {} {} (round {})...",
        spec.name,
        label(level),
        round + 1
    );
    let core = config.procedure_core.map(|c| c.to_string());
    let args = server_args(config, level, &core);
    let server = ServerProc::start(run, spec, &args, &tag)?;
    let bench = section3::bench_config(run, spec, run.connections);
    let Some(r) = run_remote_uncut(&bench, &server.endpoint, Mode::StoredProcedure)? else {
        return Ok(None);
    };
    Ok(Some(Peak {
        tps: r.tps,
        p50_us: r.p50_us,
        p99_us: r.p99_us,
        trace: server.stop()?,
    }))
}

/// Figure 6's points at `level`: open-loop loads at fractions of `peak_tps`, on a server of
/// their own, until one is not achieved; `None` where Ctrl-C or SIGTERM cut one short.
fn steps(
    config: &IsolationConfig,
    spec: &Spec,
    level: &(String, String),
    peak_tps: f64,
) -> anyhow::Result<Option<Vec<Step>>> {
    let run = &config.run;
    let core = config.procedure_core.map(|c| c.to_string());
    let args = server_args(config, level, &core);
    let tag = format!("{}-latency", label(level).replace(' ', "-"));
    let server = ServerProc::start(run, spec, &args, &tag)?;
    let bench = section3::bench_config(run, spec, run.connections);
    let mut points = Vec::new();
    for &step in &config.steps {
        let rate = (step * peak_tps).max(1.0);
        let open = BenchConfig {
            rate: Some(rate),
            ..bench.clone()
        };
        let Some(r) = run_remote_uncut(&open, &server.endpoint, Mode::StoredProcedure)? else {
            return Ok(None);
        };
        points.push((rate, r.tps, r.p50_us, r.p99_us));
        if r.tps < 0.9 * rate {
            break;
        }
    }
    Ok(Some(points))
}

/// Figure 7's table and stacked bars for one workload.
fn figure7(workload: &str, cells: &[Cell], out: &Path) -> anyhow::Result<String> {
    let phases = [
        ("procedure", "procedure execution"),
        ("isolation", "isolation overhead"),
        ("query", "query execution"),
        ("read", "socket read"),
        ("queues", "request queuing"),
        ("send", "network send"),
    ];
    let mut text = format!(
        "## {workload}: time per transaction in each phase (µs; Figure 7)\n\n\
         Isolation overhead is a call's wall time at the worker less its engine calls and the \
         procedure process's own time in the procedure; its share is of the worker's time per \
         transaction at the peak (1/throughput, one worker).\n\n\
         | level | txn/s (median) | rounds | procedure | isolation | query | socket read | queues | send | isolation share | vs none |\n\
         |---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    );
    let base = cells
        .iter()
        .find(|c| c.label == "none")
        .or_else(|| cells.iter().find(|c| c.label == "rust"))
        .map(|c| c.tps);
    let mut series: Vec<(String, Vec<f64>)> = phases
        .iter()
        .map(|(short, _)| (short.to_string(), Vec::new()))
        .collect();
    for c in cells {
        let v: Vec<f64> = phases
            .iter()
            .map(|(short, phase)| {
                if *short == "queues" {
                    us(&c.trace, "request queuing") + us(&c.trace, "response queuing")
                } else {
                    us(&c.trace, phase)
                }
            })
            .collect();
        for (s, x) in series.iter_mut().zip(&v) {
            s.1.push(*x);
        }
        let per_txn_us = 1e6 / c.tps.max(1e-9);
        let share = 100.0 * v[1] / per_txn_us;
        let vs = base.map_or("-".to_string(), |b| format!("{:.2}×", c.tps / b));
        let rounds: Vec<String> = c.tps_rounds.iter().map(|t| format!("{t:.0}")).collect();
        text.push_str(&format!(
            "| {} | {:.0} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {share:.0}% | {vs} |\n",
            c.label,
            c.tps,
            rounds.join(" / "),
            v[0],
            v[1],
            v[2],
            v[3],
            v[4],
            v[5]
        ));
    }
    text.push('\n');
    let name = format!("isolation-fig7-{workload}");
    if stacked_bars(
        &format!("{workload}: time per transaction by phase and isolation level"),
        "µs per transaction",
        cells.iter().map(|c| c.label.clone()).collect(),
        series,
        out,
        &name,
    )? {
        text.push_str(&format!("![{name}]({name}.svg)\n\n"));
    }
    Ok(text)
}

/// Figure 6's table and lines for one workload.
fn figure6(workload: &str, cells: &[Cell], out: &Path) -> anyhow::Result<String> {
    let mut text = format!(
        "## {workload}: latency against throughput (Figure 6)\n\n\
         | level | offered/s | achieved/s | p50 µs | p99 µs |\n|---|---:|---:|---:|---:|\n"
    );
    let mut lines = Vec::new();
    for (i, c) in cells.iter().enumerate() {
        for p in &c.points {
            text.push_str(&format!(
                "| {} | {:.0} | {:.0} | {} | {} |\n",
                c.label, p.0, p.1, p.2, p.3
            ));
        }
        text.push_str(&format!(
            "| {} | closed loop | {:.0} | {} | {} |\n",
            c.label, c.tps, c.p50_us, c.p99_us
        ));
        for (suffix, dashed, pick) in [("median", false, 2usize), ("p99", true, 3usize)] {
            lines.push(Line {
                name: format!("{} {suffix}", c.label),
                points: c
                    .points
                    .iter()
                    .map(|p| (p.1, if pick == 2 { p.2 } else { p.3 } as f64))
                    .collect(),
                ranges: Vec::new(),
                color: i,
                dashed,
            });
        }
    }
    text.push('\n');
    let name = format!("isolation-fig6-{workload}");
    let figure = Lines {
        title: format!("{workload}: latency against throughput by isolation level"),
        x_label: "achieved throughput (txn/s)".into(),
        y_label: "latency (µs)".into(),
        lines,
    };
    if line_figure(&figure, out, &name)? {
        text.push_str(&format!("![{name}]({name}.svg)\n\n"));
    }
    Ok(text)
}

fn write(path: &PathBuf, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_says_whether_shm_poll_spun() {
        // The procedure processes on the server's core: nobody spins.
        for core in [None, Some(0)] {
            let note = shm_poll_note(0, core);
            assert!(note.contains("neither spins"), "{note}");
        }
        // On a core of their own: both spin, for as long as the server's rule says.
        let note = shm_poll_note(0, Some(2));
        let spin = server::isolation::SPIN.as_micros();
        assert!(
            note.contains(&format!("both spin on the channel for {spin} µs")),
            "{note}"
        );
    }

    #[test]
    fn levels_parse_with_their_channels_and_refuse_what_does_not_fit() {
        let l = parse_levels("rust,process:tcp,container").unwrap();
        assert_eq!(
            l,
            vec![
                ("rust".to_string(), "-".to_string()),
                ("process".to_string(), "tcp".to_string()),
                ("container".to_string(), "uds".to_string()),
            ]
        );
        assert!(parse_levels("rust:tcp").is_err());
        assert!(parse_levels("process:pipe").is_err());
        assert_eq!(
            parse_levels("vm").unwrap(),
            vec![("vm".to_string(), "virtio".to_string())]
        );
        assert_eq!(
            parse_levels("vm:tcp").unwrap(),
            vec![("vm".to_string(), "tcp".to_string())]
        );
        assert_eq!(
            parse_levels("vm:shm-poll").unwrap(),
            vec![("vm".to_string(), "shm-poll".to_string())]
        );
        assert!(parse_levels("vm:shm-uds").is_err());
        assert!(parse_levels("process:virtio").is_err());
        assert_eq!(
            parse_levels("wasm").unwrap(),
            vec![("wasm".to_string(), "-".to_string())]
        );
        assert_eq!(default_levels().len(), 8);
    }
}
